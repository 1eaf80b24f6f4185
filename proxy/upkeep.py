"""Store upkeep off the request path: periodic WAL checkpoints, the search index of bulk imports, and
the retention sweep.

All are tasks owned by the app's store cleanup context: checkpoints run in a worker thread on their
own connection (the store's lock serialises them with its writers); indexing and the retention sweep
on the engine thread, where every other store call runs (proxy/engine_host.py). A bulk import (an
agent resuming a session: thousands of messages in one request) is stored unindexed, so its request
does not pay for two full-text indexes; it is indexed INDEX_BATCH messages per transaction once
the engine thread is idle, other requests served between batches.

Checkpoint strategy (docs/operations.md "Checkpoints"): every CHECKPOINT_TICK_S a PASSIVE checkpoint,
which never blocks a request but cannot empty the WAL while writes keep coming; then, when the WAL
file exceeds WAL_TRUNCATE_BYTES, a TRUNCATE checkpoint, which holds writers back just long enough to
copy the few frames written since and empty the file. Writers in a tight loop can starve it (it
waits only TRUNCATE_BUSY_MS for its turn); past WAL_EXCLUSIVE_BYTES it runs under the store's lock,
so requests wait for it instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Sequence

from structlog.typing import FilteringBoundLogger

from config.errors import CtxProxyError
from config.settings import StoreSettings
from proxy.engine_host import StoreRunner
from store.interface import StoreBackend

CHECKPOINT_TICK_S = 0.2  # a PASSIVE checkpoint, then the WAL's size looked at (~30 MB/s of WAL under load)
WAL_TRUNCATE_BYTES = 8 * 1024 * 1024  # over this, a TRUNCATE checkpoint
WAL_EXCLUSIVE_BYTES = 32 * 1024 * 1024  # over this, one that writers cannot starve
INDEX_TICK_S = 0.25  # how often the store is asked for unindexed messages (one indexed lookup)
INDEX_BATCH = 250  # messages indexed per transaction (~15 ms of the engine thread)
IDLE_HOP_S = 0.005  # an empty call to the engine thread slower than this: it is busy, indexing waits
RETENTION_INTERVAL_S = 3600.0
DAY_S = 86_400.0


def wal_bytes(settings: StoreSettings) -> int:
    """Size of the store's WAL file now (0 when there is none)."""
    with contextlib.suppress(OSError):
        return os.path.getsize(settings.path + "-wal")
    return 0


def checkpoint_once(store: StoreBackend, settings: StoreSettings, *,
                    truncate_over: int = WAL_TRUNCATE_BYTES,
                    exclusive_over: int = WAL_EXCLUSIVE_BYTES) -> bool:
    """One tick: PASSIVE (copies what it can, blocking nobody), then, when the WAL file is over
    `truncate_over` bytes, TRUNCATE (which only has the frames written since to copy, so holds
    writers back briefly), exclusive past `exclusive_over`; whether the last one completed. A WAL
    past `exclusive_over` already goes straight to the exclusive TRUNCATE: writers would add to it
    for as long as a PASSIVE pass takes (seconds when the disk is busy: a 65 MiB WAL in one bench)."""
    if wal_bytes(settings) > exclusive_over:
        return store.checkpoint("TRUNCATE", exclusive=True)
    done = store.checkpoint("PASSIVE")
    size = wal_bytes(settings)
    if size > exclusive_over:
        return store.checkpoint("TRUNCATE", exclusive=True)
    if size > truncate_over:
        return store.checkpoint("TRUNCATE")
    return done


async def checkpoint_periodically(store: StoreBackend, settings: StoreSettings,
                                  logger: FilteringBoundLogger,
                                  tick_s: float = CHECKPOINT_TICK_S) -> None:
    """WAL checkpoints in a worker thread, so no request's commit pays for syncing the file. When
    cancelled, a checkpoint in flight is finished first (a thread cannot be interrupted): the final
    TRUNCATE at shutdown would otherwise meet it and be answered busy."""
    while True:
        await asyncio.sleep(tick_s)
        tick = asyncio.ensure_future(asyncio.to_thread(checkpoint_once, store, settings))
        try:
            await asyncio.shield(tick)
        except asyncio.CancelledError:
            with contextlib.suppress(CtxProxyError):
                await tick
            raise
        except CtxProxyError as exc:  # a busy store retries at the next tick
            logger.warning("store.checkpoint_failed", error=exc.message)


async def index_periodically(hosts: Sequence[StoreRunner], store: StoreBackend, logger: FilteringBoundLogger,
                             tick_s: float = INDEX_TICK_S, batch: int = INDEX_BATCH) -> None:
    """Index what bulk imports left unindexed, a batch per engine-thread call while every engine is
    idle (an import in flight keeps its thread busy: its own rows wait until it is done; another
    engine's requests would wait on a batch holding the store)."""
    while True:
        await asyncio.sleep(tick_s)
        try:
            while (await engines_idle(hosts)
                   and await hosts[0].run(lambda: store.index_pending(batch)) >= batch):
                pass
        except CtxProxyError as exc:  # a busy store retries at the next tick
            logger.warning("store.index_failed", error=exc.message)


async def engines_idle(hosts: Sequence[StoreRunner]) -> bool:
    """Whether an empty call reached each engine thread and came back at once (nothing queued there)."""
    for host in hosts:
        began = time.monotonic()
        await host.run(lambda: None)
        if time.monotonic() - began >= IDLE_HOP_S:
            return False
    return True


def expire_idle(store: StoreBackend, retention_days: float, now: float) -> int:
    """Delete every tenant's conversations idle for more than `retention_days`; how many went."""
    before = now - retention_days * DAY_S
    return sum(store.for_tenant(t).delete_idle(before) for t in store.tenant_ids())


async def sweep_retention(runner: StoreRunner, store: StoreBackend, retention_days: float,
                          logger: FilteringBoundLogger) -> None:
    """One retention sweep where the store lives, logged when it deleted something."""
    try:
        deleted = await runner.run(lambda: expire_idle(store, retention_days, time.time()))
    except CtxProxyError as exc:
        logger.warning("store.retention_failed", error=exc.message)
        return
    if deleted:
        logger.info("store.retention", conversations_deleted=deleted, retention_days=retention_days)


async def retain_periodically(runner: StoreRunner, store: StoreBackend, retention_days: float,
                              logger: FilteringBoundLogger,
                              interval_s: float = RETENTION_INTERVAL_S) -> None:
    """The retention sweep every `interval_s` (the first one runs at start-up, before serving)."""
    while True:
        await asyncio.sleep(interval_s)
        await sweep_retention(runner, store, retention_days, logger)
