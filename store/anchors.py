"""Anchor corrections: the newest value of a (kind, key) is active, older ones are superseded.

Drafts are applied in source order. An identical active value is not added twice. A different value
supersedes the active one, unless the draft comes from an older message than the active anchor (a
late extraction of an old turn): then it is stored already superseded, so history keeps both.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from store import rows
from store.ingest import Runner
from store.models import Anchor, AnchorDraft


def _active(run: Runner, cid: str, draft: AnchorDraft) -> sqlite3.Row | None:
    row: sqlite3.Row | None = run(
        "SELECT * FROM anchors WHERE tenant_id = :tenant AND conversation_id = :cid AND kind = :kind "
        "AND key = :key AND status = 'active' ORDER BY id DESC LIMIT 1",
        {"cid": cid, "kind": draft.kind, "key": draft.key}).fetchone()
    return row


def _insert(run: Runner, cid: str, draft: AnchorDraft, superseded_by: int | None) -> int:
    cur = run("INSERT INTO anchors (tenant_id, conversation_id, kind, key, value, source_message_id, "
              "source_seq, status, superseded_by, created_at) VALUES (:tenant, :cid, :kind, :key, :value, "
              ":source, :seq, :status, :by, :now)",
              {"cid": cid, "kind": draft.kind, "key": draft.key, "value": draft.value,
               "source": draft.source_message_id, "seq": draft.source_seq,
               "status": "active" if superseded_by is None else "superseded", "by": superseded_by,
               "now": time.time()})
    return int(cur.lastrowid or 0)


def _get(run: Runner, anchor_id: int) -> Anchor:
    row = run("SELECT * FROM anchors WHERE tenant_id = :tenant AND id = :id", {"id": anchor_id}).fetchone()
    return rows.anchor(row)


def upsert_anchors(run: Runner, cid: str, drafts: Sequence[AnchorDraft]) -> tuple[list[Anchor], list[Anchor]]:
    """Apply drafts inside the caller's transaction; return (added, superseded)."""
    added: list[Anchor] = []
    superseded: list[Anchor] = []
    for draft in sorted(drafts, key=lambda d: d.source_seq):
        active = _active(run, cid, draft)
        if active is not None and active["value"] == draft.value:
            continue
        if active is not None and draft.source_seq >= 0 and active["source_seq"] > draft.source_seq:
            superseded.append(_get(run, _insert(run, cid, draft, superseded_by=active["id"])))
            continue
        new_id = _insert(run, cid, draft, superseded_by=None)
        added.append(_get(run, new_id))
        if active is not None:
            run("UPDATE anchors SET status = 'superseded', superseded_by = :by WHERE tenant_id = :tenant "
                "AND id = :id", {"by": new_id, "id": active["id"]})
            superseded.append(_get(run, active["id"]))
    return added, superseded
