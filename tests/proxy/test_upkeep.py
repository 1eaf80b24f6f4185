"""The checkpoint strategy (proxy/upkeep.py): the WAL stays bounded while writes keep coming."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
import structlog

from config.settings import StoreSettings
from proxy.upkeep import checkpoint_once, checkpoint_periodically, wal_bytes
from store.interface import StoreBackend
from store.sqlite.db import CheckpointMode
from store.sqlite.store import Store
from store.tenant import TenantStore
from tests.store.store_helpers import TokenCounter, history

PAYLOAD = [{"content": "x" * 2_000}]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Store, TenantStore, str]]:
    """A store opened like the server opens it (no automatic checkpoints), one conversation."""
    store = Store.open(StoreSettings(path=str(tmp_path / "s.db")), autocheckpoint=False)
    tenant = store.for_tenant("t")
    cid = tenant.ingest(history(2), model="m", external_id=None, count_tokens=TokenCounter()).conversation.id
    yield store, tenant, cid
    store.close()


def test_small_wal_gets_a_passive_checkpoint_large_one_is_emptied(
        served: tuple[Store, TenantStore, str]) -> None:
    store, tenant, cid = served
    for _ in range(50):
        tenant.record_tool_round(cid, [], PAYLOAD)
    before = wal_bytes(store.settings)
    assert before > 100_000
    assert checkpoint_once(store, store.settings) is True
    assert wal_bytes(store.settings) == before  # PASSIVE copies frames, keeps the file
    assert checkpoint_once(store, store.settings, truncate_over=before // 2) is True
    assert wal_bytes(store.settings) == 0
    for _ in range(50):
        tenant.record_tool_round(cid, [], PAYLOAD)
    assert checkpoint_once(store, store.settings, truncate_over=10**9, exclusive_over=1) is True
    assert wal_bytes(store.settings) == 0
    assert len(tenant.tool_rounds(cid)) == 100


class CheckpointLog:
    """A store that only records the checkpoints asked of it (each completes)."""

    def __init__(self) -> None:
        self.asked: list[tuple[CheckpointMode, bool]] = []

    def checkpoint(self, mode: CheckpointMode = "PASSIVE", *, exclusive: bool = False) -> bool:
        self.asked.append((mode, exclusive))
        return True


@pytest.mark.parametrize(("wal", "asked"), [
    (0, [("PASSIVE", False)]),
    (2_000, [("PASSIVE", False), ("TRUNCATE", False)]),
    (20_000, [("TRUNCATE", True)]),  # past the exclusive bound: no PASSIVE pass first
])
def test_the_checkpoint_fits_the_wal_size(tmp_path: Path, wal: int, asked: list[tuple[str, bool]]) -> None:
    settings = StoreSettings(path=str(tmp_path / "s.db"))
    Path(settings.path + "-wal").write_bytes(b"x" * wal)
    store = CheckpointLog()
    assert checkpoint_once(cast(StoreBackend, store), settings, truncate_over=1_000, exclusive_over=10_000)
    assert store.asked == asked


@pytest.mark.slow
def test_truncate_completes_under_continuous_writes(served: tuple[Store, TenantStore, str]) -> None:
    store, tenant, cid = served
    done = threading.Event()

    def write() -> None:  # a busy server's pace: a commit about every millisecond
        for _ in range(3_000):
            tenant.record_tool_round(cid, [], PAYLOAD)
            time.sleep(0.0005)
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    largest, completed = 0, 0
    while not done.is_set():
        largest = max(largest, wal_bytes(store.settings))
        completed += checkpoint_once(store, store.settings, truncate_over=256 * 1024,
                                     exclusive_over=1024 * 1024)
        time.sleep(0.005)
    writer.join()
    # 3,000 x 2 KB rows write ~50 MB of WAL frames (PASSIVE alone: a ~50 MB WAL file); bounded
    # means at most the exclusive bound (1 MiB) plus what one tick lets through.
    assert completed >= 1
    assert largest < 6 * 1024 * 1024, largest
    assert len(tenant.tool_rounds(cid)) == 3_000


class _SlowCheckpoints:
    """Checkpoints of the real store that wait for `release` (a checkpoint caught in flight)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.entered = threading.Event()
        self.release = threading.Event()
        self.finished = 0

    def checkpoint(self, mode: CheckpointMode = "PASSIVE", *, exclusive: bool = False) -> bool:
        self.entered.set()
        assert self.release.wait(30)
        done = self.store.checkpoint(mode, exclusive=exclusive)
        self.finished += 1
        return done


async def test_cancelling_the_periodic_checkpoint_finishes_the_one_in_flight(
        served: tuple[Store, TenantStore, str]) -> None:
    """Shutdown cancels the periodic task, then empties the WAL: a checkpoint thread still running
    would make that TRUNCATE busy, so cancelling waits for it."""
    store, slow = served[0], _SlowCheckpoints(served[0])
    task = asyncio.create_task(checkpoint_periodically(cast(StoreBackend, slow), store.settings,
                                                       structlog.get_logger(), 0.0))
    await asyncio.to_thread(slow.entered.wait, 30)
    task.cancel()
    await asyncio.sleep(0.05)
    assert not task.done()  # still waiting for the checkpoint thread
    slow.release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert slow.finished == 1
    assert store.checkpoint("TRUNCATE") and wal_bytes(store.settings) == 0
