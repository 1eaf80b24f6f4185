"""What a forwarded request costs: the prefix it shares with the previous one, and its billed input.

Providers cache a prompt's leading part: a request re-reads at a discount whatever it shares, from
the start, with an earlier request. Measured here from the forwarded requests alone, request by
request against the previous forwarded request of the same conversation:

- shared prefix: the tool schemas (rendered first; shared only when identical) plus the whole leading
  messages identical to the previous request's, in tokens (a message that differs ends the prefix);
- billed input, Anthropic prices: 0.1 x prefix (cache read) + 1.25 x the rest (cache write);
- billed input, OpenAI prices: 0.1 x prefix when the prefix is at least 1,024 tokens, 1 x the rest;
- a step: the request does not start with the whole previous request (tools and every message), so
  the provider's cache of it is broken (compaction rewrote or dropped something it had sent).

Billed figures are in input-token equivalents (multiply by the model's input price per token).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import mean

ANTHROPIC_READ, ANTHROPIC_WRITE = 0.1, 1.25
OPENAI_READ, OPENAI_MIN_PREFIX = 0.1, 1_024


@dataclass(frozen=True)
class ForwardedRequest:
    """One forwarded request as the bill sees it: its messages' token counts and its tools."""

    message_tokens: tuple[int, ...]  # per forwarded message, framing included
    keys: tuple[str, ...]  # per forwarded message: what makes two messages identical
    tools_tokens: int
    tools_key: str
    total: int  # the whole request: messages, framing, reply priming and tools


@dataclass(frozen=True)
class RequestCost:
    """One request's tokens, the prefix it shares with the previous one, and whether it is a step."""

    tokens: int
    prefix: int
    step: bool

    @property
    def anthropic(self) -> float:
        return ANTHROPIC_READ * self.prefix + ANTHROPIC_WRITE * (self.tokens - self.prefix)

    @property
    def openai(self) -> float:
        cached = self.prefix if self.prefix >= OPENAI_MIN_PREFIX else 0
        return OPENAI_READ * cached + (self.tokens - cached)

    @property
    def reuse(self) -> float:
        return self.prefix / self.tokens if self.tokens else 0.0


def request_cost(previous: ForwardedRequest | None, current: ForwardedRequest) -> RequestCost:
    """`current`'s cost after `previous` (None: the conversation's first request, nothing cached)."""
    if previous is None:
        return RequestCost(current.total, 0, False)
    if previous.tools_key != current.tools_key:
        return RequestCost(current.total, 0, True)
    prefix, same = current.tools_tokens, 0
    for old, new, tokens in zip(previous.keys, current.keys, current.message_tokens, strict=False):
        if old != new:
            break
        prefix += tokens
        same += 1
    return RequestCost(current.total, prefix, same < len(previous.keys))


def request_costs(requests: Sequence[ForwardedRequest]) -> list[RequestCost]:
    """Each request's cost against the one before it."""
    return [request_cost(requests[i - 1] if i else None, r) for i, r in enumerate(requests)]


@dataclass(frozen=True)
class CostTotals:
    """A run's cost figures (summarizer tokens are counted beside the billed input, not in it)."""

    requests: int
    tokens: int
    prefix_tokens: int
    anthropic: float
    openai: float
    steps: int
    mean_reuse: float  # mean over requests of prefix / request tokens
    summarizer_tokens: int = 0

    @property
    def steps_per_100(self) -> float:
        return 100 * self.steps / self.requests if self.requests else 0.0

    @classmethod
    def of(cls, costs: Sequence[RequestCost], summarizer_tokens: int = 0) -> CostTotals:
        return cls(len(costs), sum(c.tokens for c in costs), sum(c.prefix for c in costs),
                   sum(c.anthropic for c in costs), sum(c.openai for c in costs),
                   sum(c.step for c in costs), mean(c.reuse for c in costs) if costs else 0.0,
                   summarizer_tokens)

    @classmethod
    def pooled(cls, parts: Sequence[CostTotals]) -> CostTotals:
        """Several conversations together (mean reuse weighted by requests)."""
        requests = sum(p.requests for p in parts)
        reuse = sum(p.mean_reuse * p.requests for p in parts) / requests if requests else 0.0
        return cls(requests, sum(p.tokens for p in parts), sum(p.prefix_tokens for p in parts),
                   sum(p.anthropic for p in parts), sum(p.openai for p in parts),
                   sum(p.steps for p in parts), reuse, sum(p.summarizer_tokens for p in parts))

