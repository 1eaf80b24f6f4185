"""Keeps the proxy's recall tool rounds within the request's token budget.

Every round of the tool loop re-asks the upstream with the forwarded messages plus the assistant's
recall calls and their results. Each result is cut to its share of what the prepared request left
free (`budget - tokens_forwarded`, at least a floor), counted with the request model's tokenizer,
and ends with a marker saying how to get the rest. A step fills the budget with raw messages, so
that free part can be small: when a round needs more, the oldest raw turns of the forwarded part
give way in the re-ask (`fit`), each run behind one pointer line; the stored view is not touched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compaction.tokens import TokenCounter
from compaction.toolpairs import SYSTEM_ROLES, Group, group_messages
from compaction.types import PreparedRequest
from config.settings import RecallSettings
from store.models import Message

MIN_RESULT_TOKENS = 256  # a round's results get at least this much (or a quarter of the budget)...
POINTER_TOKENS = 48  # ...while older raw turns can make room for it (less a pointer line)


@dataclass
class ResultBudget:
    """What the recall rounds of one turn may still add to the re-asked request, in tokens."""

    counter: TokenCounter
    settings: RecallSettings
    remaining: int
    budget: int = 0  # the request's input budget (0: `fit` leaves messages alone)
    forwarded: int = 0  # how many leading messages of a re-ask are the prepared request's
    evictable: int | None = 0  # tokens the forwarded part's older raw turns could give up (None: not
    # counted yet: only a round that calls a recall tool needs it, so it is counted then)
    prepared: tuple[Message, ...] = ()  # the forwarded part, when `evictable` is still to count
    fits: bool = False  # the prepared request is within the budget (the engine counted it)

    @classmethod
    def for_prepared(cls, prepared: PreparedRequest, counter: TokenCounter,
                     settings: RecallSettings) -> ResultBudget:
        return cls(counter, settings, max(0, prepared.budget - prepared.tokens_forwarded),
                   prepared.budget, len(prepared.messages), None, tuple(prepared.messages),
                   fits=prepared.tokens_forwarded <= prepared.budget)

    def _evictable(self) -> int:
        if self.evictable is None:
            messages = [dict(m) for m in self.prepared]
            tokens = sum(self.counter.count_message(m) for g in _droppable(messages)
                         for m in messages[g.start:g.end])
            self.evictable = max(0, tokens - POINTER_TOKENS)
        return self.evictable

    def spend(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Account for messages added to the re-asked request (the assistant's calls, the results)."""
        self.remaining -= sum(self.counter.count_message(m) for m in messages)

    def share(self, calls: int) -> int:
        """Tokens each of a round's `calls` results may take (framing included): what is free, at
        least a quarter of the budget (the floor) as far as older raw turns can make room for it."""
        floor = max(MIN_RESULT_TOKENS, self.budget // 4)
        room = max(0, self.remaining + self._evictable())
        return min(room, max(self.remaining, floor)) // max(1, calls)

    def fit(self, messages: list[Message], tools: Sequence[Mapping[str, Any]]) -> list[Message]:
        """The re-asked `messages` within the budget: the forwarded part's oldest raw turns (never a
        system message, the last user message or the last group) give way, oldest first, each run
        behind one pointer line. Unchanged when they fit (a first round always does: it is the
        prepared request, which the engine fitted and counted)."""
        if self.fits and len(messages) == self.forwarded:
            return messages
        over = self.counter.count_messages(messages) + self.counter.count_tools(list(tools)) - self.budget
        if self.budget <= 0 or over <= 0:
            return messages
        head, rest = messages[:self.forwarded], messages[self.forwarded:]
        dropped: set[int] = set()
        fitted = messages
        for group in _droppable(head):
            if over <= 0:
                break
            dropped.update(range(group.start, group.end))
            over -= sum(self.counter.count_message(m) for m in head[group.start:group.end])
            if over <= 0:  # the pointer lines cost a little: check the real request
                fitted = [*_with_pointers(head, dropped, self.settings), *rest]
                over = (self.counter.count_messages(fitted) + self.counter.count_tools(list(tools))
                        - self.budget)
        return [*_with_pointers(head, dropped, self.settings), *rest] if dropped else fitted

    def bound(self, name: str, message: Message, allowance: int) -> Message:
        """`message` (a `tool` message) with its content cut to fit `allowance` tokens."""
        content = message.get("content")
        if not isinstance(content, str) or self.counter.count_message(message) <= allowance:
            return message
        framing = self.counter.count_message({**message, "content": ""})
        total = self.counter.count_text(content)
        note = self._marker(name, total)
        keep = allowance - framing - self.counter.count_text(note) - 1
        while True:
            cut = {**message, "content": f"{head(content, max(0, keep), self.counter.count_text)}\n{note}"}
            over = self.counter.count_message(cut) - allowance
            if over <= 0 or keep <= 0:
                return cut
            keep -= over

    def _marker(self, name: str, total: int) -> str:
        how = (f"call {self.settings.expand_tool_name} with fewer ids (one at a time), or "
               f"{self.settings.search_tool_name} for the specific detail"
               if name == self.settings.expand_tool_name
               else "search again with a narrower pattern, a time window or a lower limit")
        return (f"[ctxproxy: result cut to fit the context window ({total} tokens in full; the JSON "
                f"above is incomplete); to get the rest, {how}]")


def _droppable(messages: list[Message]) -> list[Group]:
    """Groups a re-ask may leave out, oldest first: raw turns, never a system message (summaries
    and the anchor block included), the last user message or the last group."""
    groups = group_messages(messages)
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return [g for g in groups[:-1] if messages[g.start].get("role") not in SYSTEM_ROLES
            and not g.start <= last_user < g.end]


def _with_pointers(messages: list[Message], dropped: set[int], settings: RecallSettings) -> list[Message]:
    """`messages` without `dropped`, each run of them replaced by one pointer line (two tokens per
    message left out pay for it: a pointer is far smaller than any turn it stands for)."""
    out: list[Message] = []
    run = 0
    for index, message in enumerate([*messages, None]):
        if index in dropped:
            run += 1
            continue
        if run:
            out.append({"role": "system", "content": (
                f"[ctxproxy: {run} earlier messages left out here to make room for recall results; "
                f"{settings.search_tool_name} finds them]")})
            run = 0
        if message is not None:
            out.append(message)
    return out


def head(text: str, tokens: int, count: Callable[[str], int]) -> str:
    """Longest prefix of `text` with at most `tokens` tokens (binary search on characters)."""
    if tokens <= 0:
        return ""
    lo, hi = 0, min(len(text), tokens * 16)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:mid]) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]
