"""Deleting conversations with everything they own, and leaving no copy of their text behind.

Runs inside the caller's transaction with a TenantStore's tenant-bound runner. A conversation owns
its messages, summaries (and their source links), anchors, views, compaction events, forwarded log
and recall tool rounds; the search index rows go with messages and summaries through the triggers.
Leaving no copy of the text in the files is the backend's part (`TenantConnection.scrub`: on SQLite,
store/sqlite/db.py `merge_step` and a TRUNCATE checkpoint).
"""

from __future__ import annotations

from store.runner import Runner

# Tables whose rows belong to one conversation (column conversation_id), summaries aside.
OWNED_TABLES = ("messages", "anchors", "views", "compaction_events", "forwarded", "forwarded_tips",
                "tool_rounds", "step_leases")


def delete_conversations(run: Runner, selector: str, params: dict[str, object]) -> int:
    """Delete the tenant's conversations matching `selector` (SQL over `conversations` columns, may
    use `params`) and all they own; return how many conversations went."""
    chosen = f"SELECT id FROM conversations WHERE tenant_id = :tenant AND ({selector})"
    count = int(run(f"SELECT COUNT(*) FROM ({chosen}) AS chosen", params).fetchone()[0])
    if count == 0:
        return 0
    run("DELETE FROM summary_sources WHERE tenant_id = :tenant AND summary_id IN (SELECT id FROM "
        f"summaries WHERE tenant_id = :tenant AND conversation_id IN ({chosen}))", params)
    run(f"DELETE FROM summary_source_spans WHERE tenant_id = :tenant AND conversation_id IN ({chosen})",
        params)
    for table in ("summaries", *OWNED_TABLES):
        run(f"DELETE FROM {table} WHERE tenant_id = :tenant AND conversation_id IN ({chosen})", params)
    run(f"UPDATE conversations SET forked_from = NULL WHERE tenant_id = :tenant AND forked_from IN "
        f"({chosen})", params)
    run(f"DELETE FROM conversations WHERE tenant_id = :tenant AND ({selector})", params)
    return count
