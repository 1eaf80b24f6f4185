"""The anchor block: current anchors, one short line each, ranked by value inside a bounded share.

Ranking (seed 002: age is not signal): pinned first, then specific facts (names, ids, amounts,
dates, emails, URLs, paths), then decisions, then the rest (hypotheses, ruled-out ideas). Within a
class the earliest-established facts win: they are exactly what a sliding window loses. Only active
anchors are shown, so a correction's current value is the one presented; identical values are shown
once. Byte-stable for the same anchors.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from compaction.tokens import TokenCounter
from store.models import Anchor

ANCHOR_BLOCK_OPEN = "<ctxproxy:anchors>"
ANCHOR_BLOCK_CLOSE = "</ctxproxy:anchors>"
ANCHOR_BLOCK_INTRO = ("Facts from earlier in this conversation, verbatim (pinned or extracted); (msg N) is "
                      "the source message. Values shown are current: a correction replaces the older value.")
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


def _block(lines: Sequence[str], omitted: int) -> dict[str, Any]:
    body = [ANCHOR_BLOCK_OPEN, ANCHOR_BLOCK_INTRO, *lines]
    if omitted:
        body.append(f"({omitted} lower-priority anchor{'s' if omitted != 1 else ''} left out to fit "
                    "the budget)")
    body.append(ANCHOR_BLOCK_CLOSE)
    return {"role": "system", "content": "\n".join(body)}


def render_anchor_block(anchors: Sequence[Anchor], *, max_tokens: int,
                        counter: TokenCounter) -> dict[str, Any] | None:
    """One system message with the current anchors, within `max_tokens`; None when nothing fits.

    Over budget, the highest-ranked anchors are kept and the block says how many were left out.
    """
    ranked = current_anchors(anchors)
    if not ranked:
        return None
    full = _block([anchor_line(a) for a in ranked], 0)
    if counter.count_message(full) <= max_tokens:
        return full
    kept = _fit(ranked, max_tokens, counter)
    if not kept:
        return None
    block = _block([anchor_line(a) for a in kept], len(ranked) - len(kept))
    return block if counter.count_message(block) <= max_tokens else None


def _fit(ranked: list[Anchor], max_tokens: int, counter: TokenCounter) -> list[Anchor]:
    """Greedy selection in rank order, then checked against the real rendered size."""
    used = counter.count_message(_block([], len(ranked)))
    kept: list[Anchor] = []
    for anchor in ranked:
        cost = counter.count_text(anchor_line(anchor) + "\n")
        if used + cost <= max_tokens:
            kept.append(anchor)
            used += cost
    while kept and counter.count_message(
            _block([anchor_line(a) for a in kept], len(ranked) - len(kept))) > max_tokens:
        kept.pop()  # the lowest-ranked goes first
    return kept
