"""Deleting conversations with everything they own, and leaving no copy of their text behind.

Runs inside the caller's transaction with a TenantStore's tenant-bound runner. A conversation owns
its messages, summaries (and their source links), anchors, views, compaction events, forwarded log
and recall tool rounds; the FTS5 rows go with messages and summaries through the triggers. FTS5
keeps a deleted document's terms in older segments until they are merged, so `merge_step` (run
until done) merges every index into one segment; with `PRAGMA secure_delete` (store/db.py) the
freed pages are zeroed, and a TRUNCATE checkpoint afterwards drops the WAL frames that still held
the old pages (`Store.scrub` does both).
"""

from __future__ import annotations

import sqlite3

from store.ingest import Runner

# Tables whose rows belong to one conversation (column conversation_id), summaries aside.
OWNED_TABLES = ("messages", "anchors", "views", "compaction_events", "forwarded", "forwarded_tips",
                "tool_rounds", "step_leases")
FTS_INDEXES = ("messages_fts", "messages_tri", "summaries_fts", "summaries_tri")
MERGE_PAGES = 250  # per merge step: tens of milliseconds of holding the store
MAX_MERGE_STEPS = 100_000  # a guard: new segments keep coming under load, each step is bounded
TRUNCATE_TRIES = 100  # the WAL emptied after a delete: tried again while another checkpoint runs...
TRUNCATE_RETRY_S = 0.02  # ...this far apart (a periodic PASSIVE checkpoint takes milliseconds)


def delete_conversations(run: Runner, selector: str, params: dict[str, object]) -> int:
    """Delete the tenant's conversations matching `selector` (SQL over `conversations` columns, may
    use `params`) and all they own; return how many conversations went."""
    chosen = f"SELECT id FROM conversations WHERE tenant_id = :tenant AND ({selector})"
    count = int(run(f"SELECT COUNT(*) FROM ({chosen}) AS chosen", params).fetchone()[0])
    if count == 0:
        return 0
    run("DELETE FROM summary_sources WHERE tenant_id = :tenant AND summary_id IN (SELECT id FROM "
        f"summaries WHERE tenant_id = :tenant AND conversation_id IN ({chosen}))", params)
    for table in ("summaries", *OWNED_TABLES):
        run(f"DELETE FROM {table} WHERE tenant_id = :tenant AND conversation_id IN ({chosen})", params)
    run(f"UPDATE conversations SET forked_from = NULL WHERE tenant_id = :tenant AND forked_from IN "
        f"({chosen})", params)
    run(f"DELETE FROM conversations WHERE tenant_id = :tenant AND ({selector})", params)
    return count


def merge_step(conn: sqlite3.Connection, index: str, pages: int = MERGE_PAGES) -> bool:
    """One bounded step (about `pages` pages of work) of merging `index` into a single segment, which
    drops the entries of deleted rows for good; True while there is more to do.

    A full `optimize` does the same in one statement, which on a large store holds the write lock
    for seconds (1.1 s at 50k messages); steps let requests in between.
    """
    before = conn.total_changes
    conn.execute(f"INSERT INTO {index} ({index}, rank) VALUES ('merge', ?)", (-pages,))
    return conn.total_changes - before > 1
