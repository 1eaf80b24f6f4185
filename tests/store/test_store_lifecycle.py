"""Deleting a conversation, a tenant, or idle conversations: no row, no index entry, no file bytes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from config.errors import NotFoundError
from config.settings import StoreSettings
from store.models import SearchQuery
from store.sqlite.db import checkpoint
from store.sqlite.store import Store
from store.tenant import TenantStore
from tests.store.lifecycle_helpers import holds, marked_conversation
from tests.store.store_helpers import TokenCounter, history, require_sqlite, scalar, sql

MARKER = "Qzv7Wombat3Kelp"


def _path(store: Store) -> Path:
    return Path(store.settings.path)


def _rows_of(store: Store, tenant_id: str) -> dict[str, int]:
    """Rows per table the tenant still has anywhere."""
    tables = ["conversations", "messages", "summaries", "summary_sources", "anchors", "views",
              "compaction_events", "forwarded", "tool_rounds"]
    return {t: scalar(store, f"SELECT COUNT(*) FROM {t} WHERE tenant_id = ?", (tenant_id,)) for t in tables}


def _index_sizes(store: Store) -> dict[str, int]:
    require_sqlite(store)
    with store.lock:
        return {t: store.conn.execute(f"SELECT COUNT(*) FROM {t}_docsize").fetchone()[0]
                for t in ("messages_fts", "messages_tri", "summaries_fts", "summaries_tri")}


def test_deleted_conversation_leaves_no_row_no_hit_and_no_bytes(store: Store, alice: TenantStore) -> None:
    require_sqlite(store)  # file bytes and FTS5 tables; PostgreSQL: the tests below
    cid = marked_conversation(alice, MARKER)
    kept = alice.ingest(history(2, topic="gardens"), model="m", external_id=None,
                        count_tokens=TokenCounter()).conversation.id
    store.checkpoint("TRUNCATE")
    assert holds(_path(store), MARKER)  # the check can fail: the marker is there before
    assert alice.search(SearchQuery(MARKER, all_conversations=True))
    alice.delete_conversation(cid)
    assert alice.search(SearchQuery(MARKER, all_conversations=True)) == []
    assert alice.search(SearchQuery(MARKER[3:9], all_conversations=True)) == []  # trigram too
    assert not holds(_path(store), MARKER)
    with pytest.raises(NotFoundError):
        alice.conversation(cid)
    assert [c.id for c in alice.list_conversations()] == [kept]
    assert _index_sizes(store) == {"messages_fts": 5, "messages_tri": 5, "summaries_fts": 0,
                                   "summaries_tri": 0}


def test_delete_tenant_spares_other_tenants(store: Store, alice: TenantStore, bob: TenantStore) -> None:
    for i in range(3):
        marked_conversation(alice, f"{MARKER}{i}", external_id=f"e{i}")
    bobs = marked_conversation(bob, "BobsOwnMarker9")
    assert alice.delete_tenant() == 3
    assert set(_rows_of(store, alice.tenant_id).values()) == {0}
    assert alice.search(SearchQuery(MARKER, all_conversations=True)) == []
    if isinstance(store, Store):  # file bytes: PostgreSQL leaves dead tuples to (auto)vacuum
        assert not holds(_path(store), MARKER)
        assert holds(_path(store), "BobsOwnMarker9")
    assert bob.search(SearchQuery("BobsOwnMarker9", all_conversations=True))
    assert bob.conversation(bobs).message_count == 3
    assert alice.delete_tenant() == 0


def test_other_tenants_ids_cannot_be_deleted(alice: TenantStore, bob: TenantStore) -> None:
    cid = marked_conversation(alice, MARKER)
    with pytest.raises(NotFoundError):
        bob.delete_conversation(cid)
    assert bob.delete_idle(time.time() + 3600) == 0
    assert alice.conversation(cid).message_count == 3


def test_delete_idle_removes_only_conversations_idle_since(store: Store, alice: TenantStore) -> None:
    old = marked_conversation(alice, MARKER)
    fresh = alice.ingest(history(1, topic="boats"), model="m", external_id=None,
                         count_tokens=TokenCounter()).conversation.id
    sql(store, "UPDATE conversations SET updated_at = ? WHERE id = ?", (1000.0, old))
    assert alice.delete_idle(time.time() - 86_400) == 1
    assert [c.id for c in alice.list_conversations()] == [fresh]
    assert set(_rows_of(store, alice.tenant_id).values()) > {0}
    if isinstance(store, Store):
        assert not holds(_path(store), MARKER)


def test_a_fork_survives_its_parent(alice: TenantStore) -> None:
    counter = TokenCounter()
    parent = alice.ingest(history(2), model="m", external_id=None, count_tokens=counter).conversation
    edited = history(2)
    edited[3] = {"role": "user", "content": "an edited question"}
    child = alice.ingest(edited, model="m", external_id=None, count_tokens=counter).conversation
    assert child.forked_from == parent.id
    alice.delete_conversation(parent.id)
    assert alice.conversation(child.id).forked_from is None
    assert len(alice.messages(child.id)) == 5


def test_deletion_is_zeroed_in_the_file_without_wal(tmp_path: Path) -> None:
    """secure_delete is on for every connection the store opens."""
    store = Store.open(StoreSettings(path=str(tmp_path / "s.db")))
    try:
        assert store.conn.execute("PRAGMA secure_delete").fetchone()[0] == 1
    finally:
        store.close()


def test_a_delete_empties_the_wal_while_another_connection_keeps_checkpointing(
        store: Store, alice: TenantStore) -> None:
    """The periodic checkpoint (its own connection, every 0.2 s in a server) holds the checkpoint
    lock now and then; a TRUNCATE meeting it is answered busy at once. The scrub tries again, so
    the deleted text is still in no file (one try alone lost this race about once in 20 deletes
    of the HTTP suite)."""
    require_sqlite(store)
    cid = marked_conversation(alice, MARKER)
    stop = threading.Event()

    def checkpoint_often() -> None:
        while not stop.is_set():
            checkpoint(store.settings.path, store.settings.busy_timeout_ms, "PASSIVE")
            time.sleep(0.001)

    other = threading.Thread(target=checkpoint_often)
    other.start()
    try:
        for _ in range(5):  # each delete writes, then must empty the WAL past the other checkpointer
            alice.delete_conversation(cid)
            assert not holds(_path(store), MARKER)
            cid = marked_conversation(alice, MARKER)
    finally:
        stop.set()
        other.join()
