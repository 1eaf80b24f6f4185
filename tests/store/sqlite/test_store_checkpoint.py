"""WAL checkpoints off the request path: with autocheckpoint off, only `checkpoint()` folds the WAL."""

from __future__ import annotations

from pathlib import Path

from config.settings import StoreSettings
from store.sqlite.store import Store
from tests.store.store_helpers import TokenCounter, history


def test_checkpoint_folds_the_wal_into_the_database_file(tmp_path: Path) -> None:
    path = tmp_path / "ctx.db"
    store = Store.open(StoreSettings(path=str(path)), autocheckpoint=False)
    try:
        before = path.stat().st_size
        store.for_tenant("t1").ingest(history(200), model="gpt-4o-mini", external_id=None,
                                      count_tokens=TokenCounter())
        assert path.stat().st_size == before  # every page so far lives in the WAL
        store.checkpoint()
        assert path.stat().st_size > before
        assert len(store.for_tenant("t1").list_conversations()) == 1
    finally:
        store.close()


def test_only_the_serving_store_turns_automatic_checkpoints_off(tmp_path: Path) -> None:
    settings = StoreSettings(path=str(tmp_path / "ctx.db"))
    for autocheckpoint, expected in ((True, 1000), (False, 0)):
        store = Store.open(settings, autocheckpoint=autocheckpoint)
        try:
            assert store.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == expected
        finally:
            store.close()
