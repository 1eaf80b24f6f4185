"""Billed-input estimates of one request from its cached prefix, at each provider's relative prices.

Relative to the uncached input price: Anthropic bills a cache read at 0.1 and a cache write at 1.25
(every token past the prefix is written); OpenAI bills a cached prefix at 0.1 once it is at least
`OPENAI_MIN_CACHED` tokens, every other token at 1.
"""

from __future__ import annotations

from typing import Literal

Pricing = Literal["anthropic", "openai"]
OPENAI_MIN_CACHED = 1_024
CACHE_READ = 0.1
ANTHROPIC_WRITE = 1.25


def billed_input(pricing: str, prefix_tokens: int, total_tokens: int) -> int:
    """Estimated billed input tokens (uncached-price equivalents) of a request of `total_tokens`."""
    prefix = max(0, min(prefix_tokens, total_tokens))
    rest = total_tokens - prefix
    if pricing == "anthropic":
        return round(CACHE_READ * prefix + ANTHROPIC_WRITE * rest)
    if prefix < OPENAI_MIN_CACHED:
        return total_tokens
    return round(CACHE_READ * prefix + rest)


def prefix_tokens(shared: int, tokens: tuple[int, ...]) -> int:
    """Tokens of the first `shared` messages (message tokens not given count as 0)."""
    return sum(tokens[:shared])
