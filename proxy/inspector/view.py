"""The inspection data model: what a conversation looks like to the proxy, as plain JSON-ready dicts.

Pure functions over the tenant-scoped store (no aiohttp, no printing), shared by `ctxproxy inspect`
(text and --json) and the web inspector's JSON API, so both always show the same facts. Keys are
stable: scripts and the browser UI rely on them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from store.encoding.content import message_text
from store.models import (
    Anchor,
    CompactionEvent,
    ContextView,
    Conversation,
    ForwardedRecord,
    StoredMessage,
    SummaryRecord,
)

OCCUPANCY_CATEGORIES: tuple[str, ...] = ("system", "anchors", "summaries", "fresh_tail", "tools", "free")
PREVIEW_CHARS = 120
SCHEMA_VERSION = 1


class InspectableStore(Protocol):
    """The read-only slice of `store.tenant.TenantStore` the inspector needs (tenant-scoped reads)."""

    def list_conversations(self, limit: int = 50) -> list[Conversation]: ...
    def conversation(self, conversation_id: str) -> Conversation: ...
    def messages(self, conversation_id: str, *, start_seq: int = 0,
                 end_seq: int | None = None) -> list[StoredMessage]: ...
    def summaries(self, conversation_id: str) -> list[SummaryRecord]: ...
    def summary(self, summary_id: str) -> SummaryRecord: ...
    def anchors(self, conversation_id: str, *, include_superseded: bool = False) -> list[Anchor]: ...
    def events(self, conversation_id: str) -> list[CompactionEvent]: ...
    def forwarded(self, conversation_id: str) -> list[ForwardedRecord]: ...
    def view(self, conversation_id: str) -> ContextView | None: ...


# ---------------------------------------------------------------------------------------------
# Conversation list


def conversation_meta(conv: Conversation) -> dict[str, Any]:
    """A conversation's own fields (tenant shown as its hash id, never a key)."""
    return {
        "id": conv.id,
        "tenant_id": conv.tenant_id,
        "model": conv.model,
        "external_id": conv.external_id,
        "forked_from": conv.forked_from,
        "message_count": conv.message_count,
        "created_at": conv.created_at,
        "updated_at": conv.updated_at,
    }


def conversation_list(store: InspectableStore, limit: int = 200) -> list[dict[str, Any]]:
    """Newest conversations of one tenant with message and summary counts."""
    rows = []
    for conv in store.list_conversations(limit=limit):
        row = conversation_meta(conv)
        row["summary_count"] = len(store.summaries(conv.id))
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# Previews


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """One line, whitespace collapsed, cut with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# ---------------------------------------------------------------------------------------------
# Summaries: coverage and tree


def _children(record: SummaryRecord) -> tuple[str, ...]:
    return record.source_summary_ids if record.kind == "condensed" else ()


def view_summary_ids(view: ContextView | None) -> list[str]:
    """Summaries placed directly in the current view, in view order."""
    return [item.ref for item in view.items if item.kind == "summary"] if view else []


def covered_seqs(record: SummaryRecord, by_id: Mapping[str, SummaryRecord],
                 seq_of: Mapping[int, int]) -> list[int]:
    """Message seqs a summary stands for, following its sources down to messages."""
    if record.kind == "leaf" and record.source_message_ids:
        return sorted(seq_of[m] for m in record.source_message_ids if m in seq_of)
    kids = [by_id[s] for s in _children(record) if s in by_id]
    if kids:
        return sorted({seq for kid in kids for seq in covered_seqs(kid, by_id, seq_of)})
    return list(range(record.first_seq, record.last_seq + 1))


def summary_paths(view: ContextView | None, by_id: Mapping[str, SummaryRecord],
                  seq_of: Mapping[int, int]) -> dict[int, list[str]]:
    """For each summarized seq: the chain of summary ids from the one in the view down to the leaf."""
    paths: dict[int, list[str]] = {}

    def walk(record: SummaryRecord, trail: list[str]) -> None:
        trail = [*trail, record.id]
        kids = [by_id[s] for s in _children(record) if s in by_id]
        if not kids:
            for seq in covered_seqs(record, by_id, seq_of):
                paths.setdefault(seq, trail)
        for kid in kids:
            walk(kid, trail)

    for sid in view_summary_ids(view):
        if sid in by_id:
            walk(by_id[sid], [])
    return paths


def summary_status(by_id: Mapping[str, SummaryRecord], view: ContextView | None) -> dict[str, str]:
    """`in_view` (placed in the view), `condensed` (inside a deeper summary) or `detached`."""
    in_view = set(view_summary_ids(view))
    parent_of = {kid: rec.id for rec in by_id.values() for kid in _children(rec)}
    status: dict[str, str] = {}
    for sid in by_id:
        if sid in in_view:
            status[sid] = "in_view"
        elif sid in parent_of:
            status[sid] = "condensed"
        else:
            status[sid] = "detached"
    return status


def summary_provenance(rec: SummaryRecord) -> dict[str, Any]:
    """The fields every view of a summary shows: identity, place in the tree, how it was made."""
    return {"id": rec.id, "kind": rec.kind, "depth": rec.depth, "generation": rec.generation,
            "level": rec.level, "first_seq": rec.first_seq, "last_seq": rec.last_seq,
            "token_count": rec.token_count, "model": rec.model, "prompt_version": rec.prompt_version}


def summary_node(rec: SummaryRecord, status: str, seq_of: Mapping[int, int]) -> dict[str, Any]:
    """One node of the summary tree, with provenance."""
    return {
        **summary_provenance(rec),
        "children": list(_children(rec)),
        "source_message_ids": list(rec.source_message_ids),
        "source_seqs": sorted(seq_of[m] for m in rec.source_message_ids if m in seq_of),
        "status": status,
        "created_at": rec.created_at,
        "preview": preview(rec.content),
    }


def summary_tree(records: Sequence[SummaryRecord], view: ContextView | None,
                 seq_of: Mapping[int, int]) -> dict[str, Any]:
    """Nodes (oldest first) and roots: summaries no other summary condenses."""
    by_id = {r.id: r for r in records}
    status = summary_status(by_id, view)
    condensed = {kid for r in records for kid in _children(r)}
    roots = sorted((r for r in records if r.id not in condensed), key=lambda r: (r.first_seq, r.generation))
    return {
        "roots": [r.id for r in roots],
        "nodes": [summary_node(r, status[r.id], seq_of) for r in records],
        "max_depth": max((r.depth for r in records), default=None),
        "generations": max((r.generation for r in records), default=0),
    }


# ---------------------------------------------------------------------------------------------
# Timeline


def timeline(messages: Sequence[StoredMessage], paths: Mapping[int, list[str]],
             by_id: Mapping[str, SummaryRecord]) -> list[dict[str, Any]]:
    """Each message: role, preview, tokens and whether the provider sees it raw, summarized or pinned."""
    rows = []
    for msg in messages:
        path = paths.get(msg.seq, [])
        outer = by_id.get(path[0]) if path else None
        status = "pinned" if msg.pinned else ("summarised" if outer else "raw")
        rows.append({
            "seq": msg.seq,
            "id": msg.id,
            "role": msg.role,
            "source": msg.source,
            "preview": preview(message_text(msg.message)),
            "token_count": msg.token_count,
            "pinned": msg.pinned,
            "status": status,
            "summary_id": outer.id if outer else None,
            "summary_depth": outer.depth if outer else None,
            "summary_path": list(path),
            "created_at": msg.created_at,
        })
    return rows


# ---------------------------------------------------------------------------------------------
# Anchors, events


def anchor_rows(anchors: Iterable[Anchor], seq_of: Mapping[int, int]) -> list[dict[str, Any]]:
    """Anchors with their supersession links in both directions and their source message's seq."""
    items = sorted(anchors, key=lambda a: a.id)
    supersedes: dict[int, list[int]] = {}
    for a in items:
        if a.superseded_by is not None:
            supersedes.setdefault(a.superseded_by, []).append(a.id)
    by_id = {a.id: a for a in items}
    return [{
        "id": a.id,
        "kind": a.kind,
        "key": a.key,
        "value": a.value,
        "status": a.status,
        "superseded_by": a.superseded_by,
        "superseded_by_value": by_id[a.superseded_by].value if a.superseded_by in by_id else None,
        "supersedes": supersedes.get(a.id, []),
        "source_message_id": a.source_message_id,
        "source_seq": seq_of.get(a.source_message_id) if a.source_message_id is not None else None,
        "created_at": a.created_at,
    } for a in items]


def event_row(event: CompactionEvent) -> dict[str, Any]:
    """Every provenance field of a compaction event, tuples as lists."""
    row = dataclasses.asdict(event)
    return {k: list(v) if isinstance(v, tuple) else v for k, v in row.items()}


# ---------------------------------------------------------------------------------------------
# Occupancy and prefix stability


def occupancy_point(index: int, rec: ForwardedRecord) -> dict[str, Any]:
    """One forwarded request: tokens by category (free derived when absent) plus totals."""
    cats = {c: int(rec.occupancy.get(c, 0)) for c in OCCUPANCY_CATEGORIES if c != "free"}
    used = sum(cats.values())
    free = rec.occupancy.get("free")
    cats["free"] = int(free) if free is not None else max(0, rec.budget - used)
    return {
        "request": index,
        "view_version": rec.view_version,
        "tokens_received": rec.tokens_received,
        "tokens_forwarded": rec.tokens_forwarded,
        "budget": rec.budget,
        "compacted": rec.compacted,
        "used": used,
        "occupancy": cats,
        "messages_forwarded": rec.messages_forwarded,
        "shared_prefix": rec.shared_prefix,
        "extends_previous": rec.extends_previous,
        "prefix_tokens": rec.prefix_tokens,
        "billed_input_estimate": rec.billed_input_estimate,
        "full_history_billed_estimate": rec.full_history_billed_estimate,
        "cache_read_tokens": rec.cache_read_tokens,
    }


def occupancy_series(records: Sequence[ForwardedRecord]) -> list[dict[str, Any]]:
    """Occupancy per forwarded request in order, numbered from 1 (prefix comparison by the store)."""
    return [occupancy_point(i, rec) for i, rec in enumerate(records, start=1)]


def prefix_stability(series: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Share of consecutive forwarded requests whose prefix extends the previous one (cache-friendly)."""
    flags = [p["extends_previous"] for p in series if p["extends_previous"] is not None]
    stable = sum(1 for f in flags if f)
    return {
        "requests": len(series),
        "comparable": len(flags),
        "stable": stable,
        "rate": (stable / len(flags)) if flags else None,
    }


def cost_totals(series: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Sums over the forwarded requests: shared prefix, provider cache reads and both billed-input
    estimates, with what compaction saved (negative: what it cost) against the full history's."""
    billed = sum(p["billed_input_estimate"] for p in series)
    full = sum(p["full_history_billed_estimate"] for p in series)
    reported = [p["cache_read_tokens"] for p in series if p["cache_read_tokens"] is not None]
    return {
        "requests": len(series),
        "tokens_forwarded": sum(p["tokens_forwarded"] for p in series),
        "prefix_tokens": sum(p["prefix_tokens"] for p in series),
        "cache_read_tokens": sum(reported),
        "cache_reads_reported": len(reported),
        "billed_input_estimate": billed,
        "full_history_billed_estimate": full,
        "saved_estimate": full - billed,
    }


# ---------------------------------------------------------------------------------------------
# The whole inspection


def view_meta(view: ContextView | None) -> dict[str, Any] | None:
    if view is None:
        return None
    return {
        "version": view.version,
        "covered_through_seq": view.covered_through_seq,
        "items": [{"kind": i.kind, "ref": i.ref} for i in view.items],
        "anchor_ids": list(view.anchor_ids),
        "created_at": view.created_at,
    }


def inspect_conversation(store: InspectableStore, conversation_id: str) -> dict[str, Any]:
    """Everything the inspector shows about one conversation (NotFoundError for another tenant's id)."""
    conv = store.conversation(conversation_id)
    messages = store.messages(conversation_id)
    records = store.summaries(conversation_id)
    view = store.view(conversation_id)
    seq_of = {m.id: m.seq for m in messages}
    by_id = {r.id: r for r in records}
    series = occupancy_series(store.forwarded(conversation_id))
    rows = timeline(messages, summary_paths(view, by_id, seq_of), by_id)
    anchors = anchor_rows(store.anchors(conversation_id, include_superseded=True), seq_of)
    return {
        "schema": SCHEMA_VERSION,
        "conversation": conversation_meta(conv),
        "totals": _totals(rows, records, anchors),
        "view": view_meta(view),
        "timeline": rows,
        "summaries": summary_tree(records, view, seq_of),
        "anchors": anchors,
        "events": [event_row(e) for e in store.events(conversation_id)],
        "occupancy": {
            "categories": list(OCCUPANCY_CATEGORIES),
            "latest": series[-1] if series else None,
            "series": series,
        },
        "prefix_stability": prefix_stability(series),
        "cost": cost_totals(series),
    }


def _totals(rows: Sequence[Mapping[str, Any]], records: Sequence[SummaryRecord],
            anchors: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in ("raw", "summarised", "pinned")}
    return {
        "messages": len(rows),
        "message_tokens": sum(int(r["token_count"]) for r in rows),
        "raw": counts["raw"],
        "summarised": counts["summarised"],
        "pinned": counts["pinned"],
        "summaries": len(records),
        "anchors_active": sum(1 for a in anchors if a["status"] == "active"),
        "anchors_superseded": sum(1 for a in anchors if a["status"] != "active"),
    }


# ---------------------------------------------------------------------------------------------
# Expanding a summary down to its original messages


def expand_summary(store: InspectableStore, summary_id: str, max_messages: int = 2_000) -> dict[str, Any]:
    """A summary with its sources, recursively, down to the original messages (full text)."""
    rec = store.summary(summary_id)
    messages = store.messages(rec.conversation_id)
    by_msg_id = {m.id: m for m in messages}
    budget = [max_messages]
    return _expand_node(store, rec, by_msg_id, budget)


def _expand_node(store: InspectableStore, rec: SummaryRecord, by_msg_id: Mapping[int, StoredMessage],
                 budget: list[int]) -> dict[str, Any]:
    sources: list[dict[str, Any]] = []
    if rec.kind == "condensed":
        sources = [_expand_node(store, store.summary(s), by_msg_id, budget) for s in rec.source_summary_ids]
    else:
        ids = rec.source_message_ids or tuple(
            m.id for m in by_msg_id.values() if rec.first_seq <= m.seq <= rec.last_seq)
        for mid in ids:
            if mid in by_msg_id and budget[0] > 0:
                budget[0] -= 1
                sources.append(_message_node(by_msg_id[mid]))
    return {"type": "summary", **summary_provenance(rec), "content": rec.content, "sources": sources}


def _message_node(msg: StoredMessage) -> dict[str, Any]:
    return {
        "type": "message",
        "id": msg.id,
        "seq": msg.seq,
        "role": msg.role,
        "pinned": msg.pinned,
        "token_count": msg.token_count,
        "text": message_text(msg.message),
        "tool_call_id": msg.message.get("tool_call_id"),
        "created_at": msg.created_at,
    }
