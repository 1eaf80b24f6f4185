"""A conversation whose one unique marker is in every copy the store keeps, for deletion tests."""

from __future__ import annotations

from pathlib import Path

from store.interface import StoreBackend, TenantAccess
from store.models import AnchorDraft, CompactionEvent, ForwardedRecord, SummaryDraft
from store.postgres.store import PgStore
from tests.store.store_helpers import TokenCounter


def marked_conversation(tenant: TenantAccess, marker: str, *, external_id: str | None = None) -> str:
    """Messages, a summary, an anchor, an event, a forwarded record and a tool round, all carrying
    `marker`; returns the conversation id."""
    msgs = [{"role": "system", "content": "You are careful."},
            {"role": "user", "content": f"the deploy key name is {marker}, remember it"},
            {"role": "assistant", "content": f"Noted: {marker}."}]
    result = tenant.ingest(msgs, model="m", external_id=external_id, count_tokens=TokenCounter())
    cid = result.conversation.id
    ids = tuple(m.id for m in result.messages)
    tenant.add_summary(SummaryDraft(cid, "leaf", 0, "normal", f"Intent: keep {marker}.", 9, 0, 2,
                                    source_message_ids=ids, model="local/extractive", prompt_version="v1"))
    tenant.upsert_anchors(cid, [AnchorDraft("identifier", "deploy key", marker, ids[1], 1)])
    tenant.record_event(CompactionEvent(cid, "threshold", "leaf", "normal", "committed", "m",
                                        rejected_facts=(marker,)))
    tenant.record_forwarded(ForwardedRecord(cid, ("h1", "h2"), 30, 30, 100, {}, False, 0))
    tenant.record_tool_round(cid, [{"name": "context_search", "arguments": marker}],
                             [{"content": f"found {marker}"}])
    return cid


def file_bytes(db_path: Path) -> bytes:
    """The database file and its WAL, as on disk now."""
    out = b""
    for suffix in ("", "-wal"):
        file = Path(str(db_path) + suffix)
        if file.exists():
            out += file.read_bytes()
    return out


def holds(db_path: Path, marker: str) -> bool:
    """Whether the marker's bytes are anywhere in the store's files (any letter case)."""
    raw = file_bytes(db_path).lower()
    return marker.lower().encode() in raw


def table_text(store: StoreBackend) -> str:
    """PostgreSQL: every row of the store's tables as text, after a VACUUM (the analogue of the
    SQLite file check: a deleted row's text must be in no table, and its dead tuple is reclaimed)."""
    assert isinstance(store, PgStore)
    with store.db.lock:
        store.db.conn.execute("VACUUM")
        tables = [r[0] for r in store.db.conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").fetchall()]
        return "\n".join(str(row[0]) for table in tables
                         for row in store.db.conn.execute(f'SELECT t::text FROM "{table}" t').fetchall())


def store_holds(store: StoreBackend, db_path: Path, marker: str) -> bool:
    """Whether the marker is anywhere in the store, any letter case: SQLite's files (`holds`), or
    PostgreSQL's tables (`table_text`)."""
    if isinstance(store, PgStore):
        return marker.lower() in table_text(store).lower()
    return holds(db_path, marker)
