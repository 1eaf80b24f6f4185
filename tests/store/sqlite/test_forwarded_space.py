"""The forwarded log in constant space: bytes per request independent of the conversation's length,
and migration 3 converting the old per-request hash lists."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from bench.store_soak import forwarded_bytes_per_request
from config.settings import StoreSettings
from store.models import ForwardedRecord
from store.sqlite.migrations import MIGRATIONS, apply_migrations
from store.sqlite.store import Store


def test_bytes_per_forwarded_request_do_not_grow_with_the_conversation() -> None:
    short, long = forwarded_bytes_per_request(50), forwarded_bytes_per_request(500)
    assert long <= short * 1.1 + 8, (short, long)  # the old layout: ~4.8 KB vs ~35 KB
    assert long < 200


def _old_store(path: Path) -> None:
    """A version-2 store with forwarded rows in the old layout (every hash, JSON)."""
    conn = sqlite3.connect(path, isolation_level=None)
    apply_migrations(conn, [m for m in MIGRATIONS if m.version <= 2])
    conn.execute("INSERT INTO conversations VALUES ('c1', 't', 'm', NULL, NULL, 0, 0, 0)")
    for i, hashes in enumerate((["a", "b"], ["a", "b", "c"], ["x", "b", "c", "d"])):
        conn.execute("INSERT INTO forwarded (tenant_id, conversation_id, prefix_hashes_json, "
                     "tokens_received, tokens_forwarded, budget, occupancy_json, compacted, view_version, "
                     "extends_previous, created_at) "
                     "VALUES ('t', 'c1', ?, 10, 9, 100, '{\"system\": 3}', 0, 0, NULL, ?)",
                     (json.dumps(hashes), float(i)))
    conn.close()


def test_migration_3_converts_old_rows_and_keeps_the_tip(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _old_store(path)
    store = Store.open(StoreSettings(path=str(path)))
    try:
        tenant = store.for_tenant("t")
        rows = tenant.forwarded("c1")
        assert [(r.messages_forwarded, r.shared_prefix, r.extends_previous) for r in rows] == [
            (2, 0, None), (3, 2, True), (4, 0, False)]
        assert rows[0].occupancy == {"system": 3} and rows[0].tokens_forwarded == 9
        assert tenant.record_forwarded(ForwardedRecord("c1", ("x", "b", "c", "d", "e"), 1, 1, 1, {},
                                                       False, 0)) is True  # the tip came over
        columns = {r[1] for r in store.conn.execute("PRAGMA table_info(forwarded)")}
        assert "prefix_hashes_json" not in columns
    finally:
        store.close()
