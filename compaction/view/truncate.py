"""Deterministic last resort when compaction could not bring a plan within budget: no request leaves over it.

Nothing here leaves per-message husks: a message is kept whole, elided in place (elision.py: a long
head and tail around one marker, its tool pairing intact), or dropped with its whole group, every
run of dropped groups behind ONE pointer line. Stages, each run only while the plan is over budget:
1. elide tool results above the oversized limit (a quarter of the message budget) outside the newest
   group, oldest first: an old huge result gives way before anything recent;
2. elide the newest group's tool results above the fresh tail's share of the budget;
3. drop whole groups, oldest first (the anchor block last), never a protected slot (system
   messages, the last user message, the newest group);
4. elide the newest group's tool results to what is left;
5. strip the newest group's tool-call arguments;
6. the last user message: `reject` answers 400 `context_length_exceeded` (as the provider would),
   `truncate` elides it to what is left.
If nothing valid can be sent even then (system prompt and tool schemas alone), InvalidRequestError.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from compaction.tokens import TokenCounter
from compaction.view.elision import RecallNames, elide, pointer_slot, strip_arguments
from compaction.view.plan import Plan, Slot
from config.errors import InvalidRequestError
from config.settings import OversizedLastMessage

RESULT_ROLES = ("tool", "function")


@dataclass(frozen=True)
class _Fit:
    """What the stages need besides the slots."""

    plan: Plan
    limit: int
    counter: TokenCounter
    recall: RecallNames | None
    oversized: int  # tool results above this give way first
    tail_share: int  # the newest group's tool results above this give way before history is dropped

    def over(self, slots: list[Slot]) -> int:
        return replace(self.plan, slots=tuple(slots)).tokens - self.limit


Stage = Callable[[_Fit, list[Slot]], list[Slot]]


def fit(plan: Plan, counter: TokenCounter, recall: RecallNames | None, *, oversized: int,
        tail_share: int, last_message: OversizedLastMessage = "reject",
        limit: int | None = None) -> tuple[Plan, bool]:
    """`plan` cut down to `limit` (default `plan.budget`); the flag says whether anything was
    elided or dropped."""
    limit = plan.budget if limit is None else limit
    if plan.tokens <= limit:
        return plan, False
    ctx = _Fit(plan, limit, counter, recall, oversized, tail_share)
    slots = list(plan.slots)
    stages: tuple[Stage, ...] = (_elide_old, _elide_newest_to_share, _drop_runs, _elide_newest,
                                 _strip_arguments)
    for stage in stages:
        if ctx.over(slots) <= 0:
            break
        slots = stage(ctx, slots)
    if ctx.over(slots) > 0:
        slots = _last_user(ctx, slots, last_message)
    result = replace(plan, slots=tuple(slots))
    if result.tokens > limit:
        raise _too_long(result, limit)
    return result, True


def _results(slots: list[Slot], *, newest: bool) -> list[int]:
    """Indexes of tool results in (or outside) the newest group, oldest first."""
    last = slots[-1].group if slots else None
    return [i for i, s in enumerate(slots)
            if s.message.get("role") in RESULT_ROLES and (s.group == last) == newest]


def _elide_to(ctx: _Fit, slots: list[Slot], indexes: list[int], allowance: int) -> list[Slot]:
    for i in indexes:
        over = ctx.over(slots)
        if over <= 0:
            break
        if slots[i].tokens > allowance:
            slots[i] = elide(slots[i], max(allowance, slots[i].tokens - over), ctx.counter, ctx.recall)
    return slots


def _elide_old(ctx: _Fit, slots: list[Slot]) -> list[Slot]:
    return _elide_to(ctx, slots, _results(slots, newest=False), ctx.oversized)


def _elide_newest_to_share(ctx: _Fit, slots: list[Slot]) -> list[Slot]:
    return _elide_to(ctx, slots, _results(slots, newest=True), ctx.tail_share)


def _elide_newest(ctx: _Fit, slots: list[Slot]) -> list[Slot]:
    return _elide_to(ctx, slots, _results(slots, newest=True), 0)


def _drop_runs(ctx: _Fit, slots: list[Slot]) -> list[Slot]:
    """The fewest oldest droppable groups whose removal (behind pointer lines) fits, or all."""
    anchors = next((s.group for s in slots if s.category == "anchors"), None)
    groups = list(dict.fromkeys(s.group for s in slots if not s.protected and s.group != anchors))
    order = groups + ([anchors] if anchors is not None else [])

    def fits(k: int) -> bool:
        return ctx.over(_without(ctx, slots, set(order[:k]))) <= 0

    # The smallest k such that dropping the k oldest fits. Each probe rebuilds the slots (a long
    # imported history: tens of thousands), so the search starts where dropping without pointer
    # lines would just fit (pointers only add tokens: no smaller k fits) and gallops from there.
    lo = bound = _fewest_without_pointers(ctx, slots, order)
    step = 1
    while bound < len(order) and not fits(bound):  # no k <= bound fits
        lo, bound, step = bound + 1, min(len(order), bound + step), step * 2
    hi = bound  # fits, or drops every group
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return _without(ctx, slots, set(order[:lo]))


def _fewest_without_pointers(ctx: _Fit, slots: list[Slot], order: list[int]) -> int:
    """How many of the oldest groups in `order` must go for the rest to fit, pointer lines aside."""
    tokens: dict[int, int] = {}
    for slot in slots:
        tokens[slot.group] = tokens.get(slot.group, 0) + slot.tokens
    over, freed = ctx.over(slots), 0
    for k, group in enumerate(order):
        if freed >= over:
            return k
        freed += tokens.get(group, 0)
    return len(order)


def _without(ctx: _Fit, slots: list[Slot], dropped: set[int]) -> list[Slot]:
    """`slots` minus the `dropped` groups, each run of them behind one pointer line."""
    out: list[Slot] = []
    run: list[str] = []
    for slot in [*slots, None]:
        if slot is not None and slot.group in dropped:
            if slot.category != "anchors":
                run.append(slot.ref)
            continue
        if run:
            out.append(pointer_slot(run, ctx.recall, ctx.counter, len(out)))
            run = []
        if slot is not None:
            out.append(slot)
    return out


def _strip_arguments(ctx: _Fit, slots: list[Slot]) -> list[Slot]:
    last = slots[-1].group if slots else None
    for i, slot in enumerate(slots):
        if ctx.over(slots) <= 0:
            break
        if slot.group == last and slot.message.get("tool_calls"):
            slots[i] = strip_arguments(slot, ctx.counter, ctx.recall)
    return slots


def _last_user(ctx: _Fit, slots: list[Slot], policy: OversizedLastMessage) -> list[Slot]:
    """The last user message elided to what is left (`truncate`), or a 400 (`reject`)."""
    index = next((i for i in range(len(slots) - 1, -1, -1)
                  if slots[i].protected and slots[i].message.get("role") == "user"), None)
    if index is None or ctx.over(slots) >= slots[index].tokens:
        return slots  # cutting it would not be enough: the request is too long as a whole
    if policy == "reject":
        raise last_message_too_long(ctx.limit, slots[index].tokens)
    slots[index] = elide(slots[index], max(0, slots[index].tokens - ctx.over(slots)), ctx.counter,
                         ctx.recall)
    return slots


def last_message_too_long(budget: int, tokens: int) -> InvalidRequestError:
    """OpenAI's answer to a context that cannot fit, for a last user message that cannot."""
    return InvalidRequestError(
        f"This model's maximum context length leaves {budget} input tokens for this request, but its "
        f"last user message alone needs {tokens} tokens next to the system prompt, tool schemas and "
        f"newest messages. Please reduce the length of the messages.",
        param="messages", code="context_length_exceeded")


def _too_long(plan: Plan, limit: int) -> InvalidRequestError:
    return InvalidRequestError(
        f"the request needs at least {plan.tokens} input tokens (system prompt, last messages and "
        f"tool schemas, everything else elided) but only {limit} fit the context window",
        param="messages", code="context_length_exceeded")
