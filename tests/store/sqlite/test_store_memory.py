"""SQLite's memory per connection, as configured: the page cache and the memory map, both bounded."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.settings import StoreSettings
from store.sqlite.store import Store
from tests.store.store_helpers import TokenCounter, history

MAPS = Path("/proc/self/maps")


def _mapped(path: Path) -> bool:
    """Whether this process maps `path` (SQLite's mmap of the database file)."""
    return any(line.split()[-1] == str(path) for line in MAPS.read_text().splitlines() if "/" in line)


def _pragmas(store: Store) -> tuple[int, int]:
    return (store.conn.execute("PRAGMA cache_size").fetchone()[0],
            store.conn.execute("PRAGMA mmap_size").fetchone()[0])


def test_the_settings_reach_sqlite(tmp_path: Path) -> None:
    store = Store.open(StoreSettings(path=str(tmp_path / "ctx.db"), cache_mib=4, mmap_mib=16))
    try:
        assert _pragmas(store) == (-4 * 1024, 16 * 2**20)  # a negative cache_size is in KiB
    finally:
        store.close()
    store = Store.open(StoreSettings(path=str(tmp_path / "ctx.db")))
    try:
        assert _pragmas(store) == (-2 * 1024, 0)  # the defaults: 2 MiB of page cache (SQLite's own), no map
    finally:
        store.close()


@pytest.mark.skipif(not MAPS.exists(), reason="needs /proc/self/maps (Linux)")
@pytest.mark.parametrize(("mmap_mib", "mapped"), [(0, False), (16, True)])
def test_the_file_is_mapped_only_when_asked(tmp_path: Path, mmap_mib: int, mapped: bool) -> None:
    """Off by default: the file's pages stay in the kernel's page cache, out of the process's RSS."""
    path = tmp_path / "ctx.db"
    store = Store.open(StoreSettings(path=str(path), mmap_mib=mmap_mib), autocheckpoint=False)
    try:
        tenant = store.for_tenant("t1")
        tenant.ingest(history(100), model="gpt-4o-mini", external_id=None, count_tokens=TokenCounter())
        store.checkpoint("TRUNCATE")  # pages in the file, not the WAL: reads go to the file
        tenant.ingest(history(100), model="gpt-4o-mini", external_id=None, count_tokens=TokenCounter())
        assert [c.message_count for c in tenant.list_conversations()] == [201]
        assert _mapped(path) is mapped
    finally:
        store.close()
