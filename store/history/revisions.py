"""A client that rebuilds its history each turn continues its conversation: a revision, not a fork.

Some clients rebuild what they send (aider strips the reminder it appended to the previous user message
and moves its "files added to the chat" pair after the newest exchange), so a request leaves the stored
chain a few messages before its tip. When every reply the provider gave past that point is still in the
request, in order, the stored tip is such a reply, and new input follows it, the client is going on
from its own rewritten copy of this conversation: a rebuild. A regenerate drops the newest reply and
an edit drops the replies after it: both still fork (store/history/ingest.py).

A rebuild revises the conversation in place. The rows it supersedes (the divergence to the old tip)
stay, lossless, at negative positions: each revision's rows in their order, below the previous
revision's, with their ids, so summaries' source links, anchors, search and expand by id stay valid.
Live positions are seq >= 0, and every read of a history asks only for those. Summaries and anchors
of superseded rows move down with them (those anchors no longer active); the newest view is cut
before the divergence (a new version), so the request's own messages follow it raw. Runs inside
ingest's transaction.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from store import rows
from store.encoding.identity import trimmed_hash
from store.models import Message, ViewItem
from store.runner import Runner

MIN_KEPT = 2  # a rebuild keeps the first two messages (a conversation's lock key: postgres/store.py)


def is_rebuild(run: Runner, cid: str, diverged: int, tail: Sequence[Message]) -> bool:
    """Whether a request diverging at `diverged`, whose messages from there are `tail`, rebuilds the
    stored history of `cid` (see the module docstring). Replies match with their text trimmed."""
    if diverged < MIN_KEPT:
        return False
    params = {"cid": cid, "d": diverged}
    tip = run("SELECT source FROM messages WHERE tenant_id = :tenant AND conversation_id = :cid "
              "ORDER BY seq DESC LIMIT 1", params).fetchone()
    count = run("SELECT COUNT(*) FROM messages WHERE tenant_id = :tenant AND conversation_id = :cid AND "
                "seq >= :d AND source = 'reply'", params).fetchone()[0]
    if tip is None or tip[0] != "reply" or count > sum(m.get("role") == "assistant" for m in tail):
        return False  # decided without reading a body (an edit far back of a long history forks)
    bodies = run("SELECT message_json FROM messages WHERE tenant_id = :tenant AND conversation_id = :cid "
                 "AND seq >= :d AND source = 'reply' ORDER BY seq", params)
    return holds_in_order([trimmed_hash(json.loads(row[0])) for row in bodies], tail)


def holds_in_order(replies: Sequence[str], tail: Sequence[Message]) -> bool:
    """Whether `tail` holds assistant messages with the trimmed hashes `replies`, in that order, and
    more after the last of them (new input)."""
    echoed = [trimmed_hash(m) if m.get("role") == "assistant" else "" for m in tail]
    at = 0
    for reply in replies:
        try:
            at = echoed.index(reply, at) + 1
        except ValueError:
            return False
    return at < len(echoed)


def revise(run: Runner, cid: str, diverged: int) -> None:
    """Move the rows from `diverged` on (and their summaries' and anchors' positions) below zero and
    cut the newest view before `diverged`; the caller then stores the request's messages there."""
    _cut_view(run, cid, diverged)
    params = {"cid": cid, "d": diverged}
    lowest, top = run("SELECT MIN(seq), MAX(seq) FROM messages WHERE tenant_id = :tenant AND "
                      "conversation_id = :cid", params).fetchone()
    params["shift"] = min(int(lowest), 0) - (int(top) + 1 - diverged) - diverged
    run("UPDATE messages SET seq = seq + :shift WHERE tenant_id = :tenant AND conversation_id = :cid "
        "AND seq >= :d", params)
    run("UPDATE anchors SET source_seq = source_seq + :shift, status = 'superseded' WHERE tenant_id = "
        ":tenant AND conversation_id = :cid AND source_seq >= :d", params)
    # A summary straddling the divergence keeps its first position: its range then ends below zero.
    run("UPDATE summaries SET first_seq = CASE WHEN first_seq >= :d THEN first_seq + :shift ELSE first_seq "
        "END, last_seq = last_seq + :shift WHERE tenant_id = :tenant AND conversation_id = :cid "
        "AND last_seq >= :d", params)


def _cut_view(run: Runner, cid: str, diverged: int) -> None:
    """A new view version holding the newest view's leading items that end before `diverged`, and
    the anchors of its snapshot that come from what those items cover."""
    found = run("SELECT * FROM views WHERE tenant_id = :tenant AND conversation_id = :cid "
                "ORDER BY version DESC LIMIT 1", {"cid": cid}).fetchone()
    if found is None or found["covered_through_seq"] < diverged:
        return
    view = rows.view(found)
    ends = {str(r[0]): int(r[1]) for r in run("SELECT id, last_seq FROM summaries WHERE tenant_id = "
                                              ":tenant AND conversation_id = :cid", {"cid": cid})}
    kept: list[ViewItem] = []
    covered = -1
    for item in view.items:
        last = ends.get(item.ref, diverged) if item.kind == "summary" else int(item.ref)
        if last >= diverged:
            break
        kept.append(item)
        covered = last
    anchor_ids = _anchors_within(run, view.anchor_ids, covered)
    run("INSERT INTO views (tenant_id, conversation_id, version, items_json, covered_through_seq, "
        "anchor_ids_json, created_at) VALUES (:tenant, :cid, :version, :items, :covered, :anchors, :now)",
        {"cid": cid, "version": view.version + 1, "items": rows.dumps([[i.kind, i.ref] for i in kept]),
         "covered": covered, "anchors": rows.dumps(anchor_ids), "now": time.time()})


def _anchors_within(run: Runner, anchor_ids: Sequence[int], covered: int) -> list[int]:
    """Those of `anchor_ids` from a message at or before `covered` (or from no message)."""
    if not anchor_ids:
        return []
    marks, params = rows.in_list("a", list(anchor_ids))
    found = run(f"SELECT id, source_seq, source_message_id FROM anchors WHERE tenant_id = :tenant AND id IN "
                f"{marks}", params).fetchall()
    keep = {int(r[0]) for r in found if r[2] is None or int(r[1]) <= covered}
    return [a for a in anchor_ids if a in keep]
