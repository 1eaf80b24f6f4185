"""The anchor block: current anchors, one short line each, ranked by value inside a bounded share.

Ranking (by what an agent needs later, never by age: an old fact is not a less useful one): pinned first, then
specific facts (names, ids, amounts, dates, emails, URLs, paths), errors, decisions, the files the
agent edited, the commands it ran, the symbols it touched, the files it only read, and last the rest
(hypotheses, ruled-out ideas). Within a class the earliest-established facts win: they are exactly
what a sliding window loses. Facts are one line each; the agent index is one line per section
(compaction/anchors/index_block.py). Only active anchors are shown, so a correction's current value is
the one presented; identical values are shown once. Byte-stable for the same anchors.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from compaction.anchors.index import INDEX_KINDS
from compaction.anchors.index_block import INDEX_SECTIONS, build_index, index_items, section_line
from compaction.tokens import TokenCounter
from store.models import Anchor, Message

ANCHOR_BLOCK_OPEN = "<ctxproxy:anchors>"
ANCHOR_BLOCK_CLOSE = "</ctxproxy:anchors>"
ANCHOR_BLOCK_INTRO = ("Facts from earlier in this conversation, verbatim (pinned or extracted); (msg N) and "
                      "#N are the ids of their source messages. Values shown are current: a correction "
                      "replaces the older value.")
SPECIFIC_KINDS = frozenset({"name", "order", "ticket", "approval", "id", "amount", "date", "email",
                            "url", "path"})
_PREFIXED_KEYS = ("decision:", "ruled out:", "pinned:")


def anchor_class(anchor: Anchor) -> int:
    """0 pinned, 1 specific fact, 2 decision, 3 the rest (hypotheses, ruled-out ideas, others)."""
    if anchor.kind == "pinned":
        return 0
    if anchor.key.startswith("hypothesis:"):
        return 3
    if anchor.kind in SPECIFIC_KINDS:
        return 1
    return 2 if anchor.kind == "decision" else 3


def _label(anchor: Anchor) -> str:
    """What the value is about: its semantic key, else its kind (value-keyed anchors)."""
    key = anchor.key
    if key.startswith(_PREFIXED_KEYS) or key == re.sub(r"\s+", " ", anchor.value.strip().lower()):
        return anchor.kind.replace("_", " ")
    return key


def anchor_line(anchor: Anchor) -> str:
    """`- label: value (msg N)`, the value verbatim on one line."""
    value = " / ".join(part.strip() for part in anchor.value.splitlines() if part.strip())
    origin = f" (msg {anchor.source_message_id})" if anchor.source_message_id is not None else ""
    label = _label(anchor)
    if value.lower().startswith(label):  # "Decision: ..." already says what it is
        return f"- {value}{origin}"
    return f"- {label}: {value}{origin}"


def _order(anchor: Anchor) -> tuple[int, int]:
    return (anchor.source_message_id if anchor.source_message_id is not None else -1, anchor.id)


def current_anchors(anchors: Sequence[Anchor]) -> list[Anchor]:
    """Active anchors, one per kind+key (the newest) and one per value, in rank order."""
    latest: dict[tuple[str, str], Anchor] = {}
    for anchor in sorted(anchors, key=_order):
        if anchor.status == "active":
            latest[(anchor.kind, anchor.key)] = anchor
    ranked = sorted(latest.values(), key=lambda a: (anchor_class(a), *_order(a)))
    seen: set[str] = set()
    unique: list[Anchor] = []
    for anchor in ranked:
        if anchor.value not in seen:
            seen.add(anchor.value)
            unique.append(anchor)
    return unique


def _block(lines: Sequence[str], omitted: int) -> Message:
    body = [ANCHOR_BLOCK_OPEN, ANCHOR_BLOCK_INTRO, *lines]
    if omitted:
        body.append(f"({omitted} lower-priority anchor{'s' if omitted != 1 else ''} left out to fit "
                    "the budget)")
    body.append(ANCHOR_BLOCK_CLOSE)
    return {"role": "system", "content": "\n".join(body)}


@dataclass(frozen=True)
class _Entry:
    """One rankable piece of the block: a fact line, or one item of an index line."""

    priority: tuple[int, ...]
    section: str  # "" for a fact line
    text: str


def _fact_priority(anchor: Anchor, rank: int) -> tuple[int, ...]:
    """Pinned, specific facts, then (after errors) decisions; hypotheses and ruled-out ideas last."""
    return ((0, 1, 3, 8)[anchor_class(anchor)], rank)


def _entries(anchors: Sequence[Anchor]) -> list[_Entry]:
    facts = current_anchors([a for a in anchors if a.kind not in INDEX_KINDS])
    index = build_index([a for a in anchors if a.status == "active" and a.kind in INDEX_KINDS])
    indexed_files = {item.value for item in index if item.kind == "file"}
    entries = [_Entry(_fact_priority(a, rank), "", anchor_line(a)) for rank, a in enumerate(facts)
               if not (a.kind == "path" and a.value in indexed_files)]
    return entries + [_Entry(item.priority, item.section, item.text) for item in index_items(index)]


def _render_lines(entries: Sequence[_Entry]) -> list[str]:
    """Fact lines in rank order, then one line per index section (items in rank order)."""
    lines = [e.text for e in sorted(entries, key=lambda e: e.priority) if not e.section]
    for section in INDEX_SECTIONS:  # "files under /repo/" before "files" (paths outside it)
        for name in sorted({e.section for e in entries if e.section.split(" ")[0] == section}, reverse=True):
            items = [e.text for e in sorted(entries, key=lambda e: e.priority) if e.section == name]
            lines.append(section_line(name, items))
    return lines


def render_anchor_block(anchors: Sequence[Anchor], *, max_tokens: int,
                        counter: TokenCounter) -> Message | None:
    """One system message with the current anchors and the agent index, within `max_tokens`; None
    when nothing fits. Over budget, the highest-ranked entries are kept and the block says how many
    were left out."""
    entries = _entries(anchors)
    if not entries:
        return None
    full = _block(_render_lines(entries), 0)
    if counter.count_message(full) <= max_tokens:
        return full
    kept = _fit(entries, max_tokens, counter)
    if not kept:
        return None
    block = _block(_render_lines(kept), len(entries) - len(kept))
    return block if counter.count_message(block) <= max_tokens else None


def _fit(entries: list[_Entry], max_tokens: int, counter: TokenCounter) -> list[_Entry]:
    """Greedy selection in rank order, then checked against the real rendered size."""
    ranked = sorted(entries, key=lambda e: e.priority)
    used = counter.count_message(_block([], len(ranked))) + 8 * len(INDEX_SECTIONS)
    kept: list[_Entry] = []
    for entry in ranked:
        cost = counter.count_text(entry.text) + 2
        if used + cost <= max_tokens:
            kept.append(entry)
            used += cost
    while kept and counter.count_message(
            _block(_render_lines(kept), len(ranked) - len(kept))) > max_tokens:
        kept.pop()  # the lowest-ranked goes first
    return kept
