"""Deterministic last resort when compaction could not bring a plan within budget (design: Hard budget).

Stages, each run only while the plan is still over budget:
1. cut every non-system message larger than its allowance (a quarter of the message budget), head
   and tail kept around a marker saying how many tokens were cut and how to expand the message;
2. drop whole groups, oldest first (the anchor block last), never a protected slot (system messages,
   the last user message, the group of the last message), never splitting a tool round;
3. cut protected messages, largest first, the system prompt last;
4. strip tool-call arguments of the protected groups to a marker.
A cut message keeps role, name, tool_call_id and tool_calls ids. If even the bare skeleton of the
protected messages exceeds the budget, InvalidRequestError: nothing valid can be sent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from compaction.planner import Plan, Slot
from config.errors import InvalidRequestError
from store.content import content_text

MIN_ALLOWANCE = 64
Count = Callable[[Mapping[str, Any]], int]
TextCount = Callable[[str], int]


def marker(cut_tokens: int, ref: str, expand_tool: str | None) -> str:
    """The note left where content was cut; names the recall tool only when it is offered."""
    how = (f"call {expand_tool} with ids [\"{ref}\"]" if expand_tool
           else f"ask the operator to expand {ref}")
    return f"[ctxproxy: {cut_tokens} tokens truncated from message {ref}; {how}]"


def fit(plan: Plan, count: Count, count_text: TextCount, expand_tool: str | None) -> tuple[Plan, bool]:
    """`plan` cut down to `plan.budget`; the flag says whether anything was cut or dropped."""
    if plan.tokens <= plan.budget:
        return plan, False
    cutter = _Cutter(count, count_text, expand_tool)
    slots = list(plan.slots)
    for stage in (_cut_oversized, _drop_groups, _cut_protected, _strip_arguments):
        if _over(plan, slots) <= 0:
            break
        slots = stage(plan, slots, cutter)
    result = replace(plan, slots=tuple(slots))
    if result.tokens > result.budget:
        raise InvalidRequestError(
            f"the request needs at least {result.tokens} input tokens (system prompt, last turn "
            f"and tool schemas, all cut to the bone) but only {result.budget} fit the context window",
            param="messages", code="context_length_exceeded")
    return result, True


def _over(plan: Plan, slots: list[Slot]) -> int:
    return replace(plan, slots=tuple(slots)).tokens - plan.budget


def _cut_oversized(plan: Plan, slots: list[Slot], cutter: _Cutter) -> list[Slot]:
    """Cut non-system messages above their allowance, largest first, only as far as needed."""
    allowance = max(MIN_ALLOWANCE, (plan.budget - plan.tools_tokens) // 4)
    order = sorted(range(len(slots)), key=lambda i: -slots[i].tokens)
    for i in order:
        over = _over(plan, slots)
        if over <= 0 or slots[i].tokens <= allowance:
            break
        if slots[i].category != "system":
            slots[i] = cutter.cut(slots[i], max(allowance, slots[i].tokens - over))
    return slots


def _drop_groups(plan: Plan, slots: list[Slot], cutter: _Cutter) -> list[Slot]:
    protected = {s.group for s in slots if s.protected}
    order = sorted({s.group for s in slots if s.group not in protected},
                   key=lambda g: (g == _anchor_group(slots), _first_index(slots, g)))
    for group in order:
        over = _over(plan, slots)
        if over <= 0:
            break
        slots = [s for s in slots if s.group != group]
    return slots


def _anchor_group(slots: list[Slot]) -> int | None:
    return next((s.group for s in slots if s.category == "anchors"), None)


def _first_index(slots: list[Slot], group: int) -> int:
    return next(i for i, s in enumerate(slots) if s.group == group)


def _cut_protected(plan: Plan, slots: list[Slot], cutter: _Cutter) -> list[Slot]:
    order = sorted(range(len(slots)), key=lambda i: (slots[i].category == "system", -slots[i].tokens))
    for i in order:
        over = _over(plan, slots)
        if over <= 0:
            break
        slots[i] = cutter.cut(slots[i], max(0, slots[i].tokens - over))
    return slots


def _strip_arguments(plan: Plan, slots: list[Slot], cutter: _Cutter) -> list[Slot]:
    for i, slot in enumerate(slots):
        if _over(plan, slots) <= 0:
            break
        if slot.message.get("tool_calls"):
            slots[i] = cutter.strip_arguments(slot)
    return slots


class _Cutter:
    """Cuts one message's text to a token allowance, keeping head and tail around a marker."""

    def __init__(self, count: Count, count_text: TextCount, expand_tool: str | None) -> None:
        self._count = count
        self._count_text = count_text
        self._expand_tool = expand_tool

    def cut(self, slot: Slot, allowance: int) -> Slot:
        text = content_text(dict(slot.message))
        if not text or allowance >= slot.tokens:
            return slot
        overhead = slot.tokens - self._count_text(text)
        keep = allowance - overhead - self._count_text(marker(10**6, slot.ref, self._expand_tool))
        while True:
            message = self._cut_to(slot, text, max(0, keep))
            tokens = self._count(message)
            if tokens <= allowance or keep <= 0:
                return replace(slot, message=message, tokens=tokens) if tokens < slot.tokens else slot
            keep -= max(1, tokens - allowance)

    def _cut_to(self, slot: Slot, text: str, keep: int) -> dict[str, Any]:
        head = _prefix(text, keep // 2 + keep % 2, self._count_text)
        tail = _suffix(text[len(head):], keep // 2, self._count_text)
        cut = self._count_text(text) - self._count_text(head) - self._count_text(tail)
        note = marker(max(cut, 0), slot.ref, self._expand_tool)
        return {**slot.message, "content": f"{head}\n{note}\n{tail}" if tail else f"{head}\n{note}"}

    def strip_arguments(self, slot: Slot) -> Slot:
        calls = [{**c, "function": {**c.get("function", {}), "arguments": "{}"}}
                 if isinstance(c, dict) else c for c in slot.message.get("tool_calls") or ()]
        note = marker(0, slot.ref, self._expand_tool).replace("0 tokens", "tool-call arguments")
        message = {**slot.message, "tool_calls": calls, "content": note}
        return replace(slot, message=message, tokens=self._count(message))


def longest_within(length: int, fits: Callable[[int], bool]) -> int:
    """The largest n in [0, length] with `fits(n)` (binary search; `fits` must be monotone)."""
    lo, hi = 0, max(length, 0)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def prefix_within(text: str, tokens: int, count: TextCount, *, max_chars: int | None = None) -> str:
    """Longest prefix of `text` with at most `tokens` tokens (searching at most `max_chars`)."""
    if tokens < 0:
        return ""
    length = len(text) if max_chars is None else min(len(text), max_chars)
    return text[:longest_within(length, lambda n: count(text[:n]) <= tokens)]


def _prefix(text: str, tokens: int, count: TextCount) -> str:
    return prefix_within(text, tokens, count, max_chars=tokens * 8) if tokens > 0 else ""


def _suffix(text: str, tokens: int, count: TextCount) -> str:
    if tokens <= 0:
        return ""
    n = longest_within(min(len(text), tokens * 8), lambda k: count(text[len(text) - k:]) <= tokens)
    return text[len(text) - n:] if n else ""
