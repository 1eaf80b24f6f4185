"""Store upkeep off the request path: periodic WAL checkpoints and the retention sweep.

Both run in worker threads (the store's own lock serialises them with requests) as tasks owned by
the app's store cleanup context. Checkpoint strategy (README "Checkpoint strategy"): a PASSIVE
checkpoint every 5 s never blocks a request but cannot finish while writes keep coming, so whenever
the WAL file exceeds WAL_TRUNCATE_BYTES (looked at every second) a TRUNCATE checkpoint holds writers
back just long enough to copy every frame and empty the file. Writers in a tight loop can starve
it (it waits only TRUNCATE_BUSY_MS for its turn); past twice the bound it runs under the store's
lock, so requests wait for it (tens of milliseconds) instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time

from structlog.typing import FilteringBoundLogger

from config.errors import CtxProxyError
from config.settings import StoreSettings
from store.interface import StoreBackend

CHECKPOINT_TICK_S = 1.0  # how often the WAL's size is looked at
PASSIVE_EVERY_TICKS = 5  # a PASSIVE checkpoint every 5 s
WAL_TRUNCATE_BYTES = 16 * 1024 * 1024  # over this, a TRUNCATE checkpoint
RETENTION_INTERVAL_S = 3600.0
DAY_S = 86_400.0


def wal_bytes(settings: StoreSettings) -> int:
    """Size of the store's WAL file now (0 when there is none)."""
    with contextlib.suppress(OSError):
        return os.path.getsize(settings.path + "-wal")
    return 0


def checkpoint_once(store: StoreBackend, settings: StoreSettings, *, passive: bool = True,
                    truncate_over: int = WAL_TRUNCATE_BYTES) -> bool | None:
    """One tick of the strategy: over `truncate_over` bytes of WAL a TRUNCATE (which writers can
    starve), over twice that an exclusive one (which they wait for), else PASSIVE when asked;
    whether the checkpoint completed (None: none was due)."""
    size = wal_bytes(settings)
    if size > 2 * truncate_over:
        return store.checkpoint("TRUNCATE", exclusive=True)
    if size > truncate_over:
        return store.checkpoint("TRUNCATE")
    return store.checkpoint("PASSIVE") if passive else None


async def checkpoint_periodically(store: StoreBackend, settings: StoreSettings,
                                  logger: FilteringBoundLogger,
                                  tick_s: float = CHECKPOINT_TICK_S) -> None:
    """WAL checkpoints in a worker thread, so no request's commit pays for syncing the file."""
    ticks = 0
    while True:
        await asyncio.sleep(tick_s)
        ticks += 1
        try:
            await asyncio.to_thread(checkpoint_once, store, settings,
                                    passive=ticks % PASSIVE_EVERY_TICKS == 0)
        except CtxProxyError as exc:  # a busy store retries at the next tick
            logger.warning("store.checkpoint_failed", error=exc.message)


def expire_idle(store: StoreBackend, retention_days: float, now: float) -> int:
    """Delete every tenant's conversations idle for more than `retention_days`; how many went."""
    before = now - retention_days * DAY_S
    return sum(store.for_tenant(t).delete_idle(before) for t in store.tenant_ids())


async def sweep_retention(store: StoreBackend, retention_days: float,
                          logger: FilteringBoundLogger) -> None:
    """One retention sweep in a worker thread, logged when it deleted something."""
    try:
        deleted = await asyncio.to_thread(expire_idle, store, retention_days, time.time())
    except CtxProxyError as exc:
        logger.warning("store.retention_failed", error=exc.message)
        return
    if deleted:
        logger.info("store.retention", conversations_deleted=deleted, retention_days=retention_days)


async def retain_periodically(store: StoreBackend, retention_days: float, logger: FilteringBoundLogger,
                              interval_s: float = RETENTION_INTERVAL_S) -> None:
    """The retention sweep every `interval_s` (the first one runs at start-up, before serving)."""
    while True:
        await asyncio.sleep(interval_s)
        await sweep_retention(store, retention_days, logger)
