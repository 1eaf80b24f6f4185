"""Why ctxproxy lost a needed identifier at a request: which mechanism removed it.

Each forwarded message is traced to its origin from ctxproxy's visible output only: a raw history
message (by tool-call id, else by role and content prefix in order), cut or not; a summary (its tag
names the id and the covered messages); the anchor block. The identifier's newest occurrence in the
history is then explained by what happened to that message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from compaction import Message
from replay.needed_later.placeholders import has_marker
from replay.needed_later.texts import occurs, readable_text
from store.encoding.content import content_text

OriginKind = Literal["raw", "summary", "anchors", "system"]
Mechanism = Literal["cut", "dropped_raw", "dropped_summary", "summarised_without_it",
                    "summarised_at_truncation_level", "condensed_without_it", "forwarded_unmatched"]
SUMMARY_TAG = re.compile(r'<ctxproxy:summary id="(sum_\w+)" depth="(\d+)" messages="(\d+)-(\d+)">')
ANCHORS_OPEN = "<ctxproxy:anchors>"


@dataclass(frozen=True)
class Origin:
    """Where one forwarded message came from."""

    kind: OriginKind
    seq: int | None = None  # raw: index in the history
    cut: bool = False  # raw: carries a marker
    summary_id: str | None = None
    first: int | None = None  # summary: covered messages
    last: int | None = None
    depth: int = 0


def _call_key(message: Message) -> str | None:
    if message.get("role") == "tool":
        return f"result:{message.get('tool_call_id')}"
    calls = message.get("tool_calls") or ()
    return f"call:{calls[0].get('id')}" if calls and isinstance(calls[0], Mapping) else None


def _special(message: Message) -> Origin | None:
    text = content_text(message)
    tag = SUMMARY_TAG.search(text)
    if tag:
        return Origin("summary", summary_id=tag.group(1), depth=int(tag.group(2)),
                      first=int(tag.group(3)), last=int(tag.group(4)))
    return Origin("anchors") if ANCHORS_OPEN in text else None


def _raw(message: Message, history: Sequence[Message], by_call: Mapping[str, int], cursor: int) -> Origin:
    text = content_text(message)
    cut = has_marker(text)
    key = _call_key(message)
    if key is not None and key in by_call:
        return Origin("raw", seq=by_call[key], cut=cut)
    head = text.split("\n[ctxproxy:")[0]
    role = message.get("role")
    kind: OriginKind = "system" if role in ("system", "developer") else "raw"
    for i in range(cursor, len(history)):
        if history[i].get("role") == role and content_text(history[i]).startswith(head):
            return Origin(kind, seq=i, cut=cut)
    return Origin(kind, cut=cut)


def trace_origins(history: Sequence[Message], forwarded: Sequence[Message]) -> list[Origin]:
    """The origin of every forwarded message, in order."""
    by_call = {key: i for i, m in enumerate(history) if (key := _call_key(m))}
    cursor, out = 0, []
    for message in forwarded:
        origin = _special(message) or _raw(message, history, by_call, cursor)
        if origin.kind == "raw" and origin.seq is not None:
            cursor = origin.seq + 1
        out.append(origin)
    return out


def explain_loss(ident: str, last_seen: int, origins: Sequence[Origin],
                 levels: Mapping[str, str], summarized: Sequence[tuple[int, int]]) -> Mechanism:
    """The mechanism that removed `ident`, whose newest occurrence is history message `last_seen`.

    `levels` maps the summary ids committed so far to their fallback level; `summarized` lists the
    message ranges of every summary committed so far (forwarded or not).
    """
    raw = next((o for o in origins if o.kind == "raw" and o.seq == last_seen), None)
    if raw is not None:
        return "cut" if raw.cut else "forwarded_unmatched"
    cover = next((o for o in origins if o.kind == "summary" and o.first is not None and o.last is not None
                  and o.first <= last_seen <= o.last), None)
    if cover is not None:
        if levels.get(cover.summary_id or "") == "truncation":
            return "summarised_at_truncation_level"
        return "condensed_without_it" if cover.depth > 0 else "summarised_without_it"
    if any(first <= last_seen <= last for first, last in summarized):
        return "dropped_summary"
    return "dropped_raw"


def kept_by(ident: str, origins: Sequence[Origin], forwarded: Sequence[Message]) -> OriginKind | None:
    """Which kind of forwarded message carried `ident` (the first that does), or None."""
    for origin, message in zip(origins, forwarded, strict=True):
        if occurs(ident, readable_text(message)):
            return origin.kind
    return None
