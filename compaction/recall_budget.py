"""Keeps the proxy's recall tool rounds within the request's token budget.

Every round of the tool loop re-asks the upstream with the forwarded messages plus the assistant's
recall calls and their results. Those additions must fit what the prepared request left free
(`budget - tokens_forwarded`), so each result is cut to its share of what is still free, counted
with the request model's tokenizer, and ends with a marker saying how to get the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compaction.tokens import TokenCounter
from compaction.types import PreparedRequest
from config.settings import RecallSettings

MIN_RESULT_TOKENS = 256  # a result always gets this much, even when the budget is spent


@dataclass
class ResultBudget:
    """What the recall rounds of one turn may still add to the re-asked request, in tokens."""

    counter: TokenCounter
    settings: RecallSettings
    remaining: int

    @classmethod
    def for_prepared(cls, prepared: PreparedRequest, counter: TokenCounter,
                     settings: RecallSettings) -> ResultBudget:
        return cls(counter, settings, max(0, prepared.budget - prepared.tokens_forwarded))

    def spend(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Account for messages added to the re-asked request (the assistant's calls, the results)."""
        self.remaining -= sum(self.counter.count_message(m) for m in messages)

    def share(self, calls: int) -> int:
        """Tokens each of a round's `calls` results may take (framing included), at least the floor."""
        return max(MIN_RESULT_TOKENS, self.remaining // max(1, calls))

    def bound(self, name: str, message: dict[str, Any], allowance: int) -> dict[str, Any]:
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
