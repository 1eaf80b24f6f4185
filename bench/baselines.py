"""Baseline context strategies ctxproxy is compared with: (full history, budget, counter) -> forwarded.

They are kept honest, as their users run them: passthrough forwards everything (and overflows),
the sliding window keeps the system prompt plus the newest whole messages that fit (and may cut a
tool_calls message away from its results, as naive windows do), and litellm's `trim_messages` is
called exactly as documented with `max_tokens=budget`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from compaction import llm
from compaction.replay_checks import Counter

Message = dict[str, Any]
Strategy = Callable[[Sequence[Message], int, Counter], list[Message]]


def passthrough(history: Sequence[Message], budget: int, counter: Counter) -> list[Message]:
    """No compaction at all: the provider sees the whole history (over budget when it is long)."""
    return [dict(m) for m in history]


def sliding_window(history: Sequence[Message], budget: int, counter: Counter) -> list[Message]:
    """System prompt(s) + the newest messages that fit, counted in whole messages.

    Tool pairing is deliberately not repaired: a window starting at a `tool` message is what a
    naive implementation forwards, and the checks count it as a violation.
    """
    system = [dict(m) for m in history if m.get("role") in ("system", "developer")]
    used = counter.count_messages(system)
    kept: list[Message] = []
    for message in reversed([m for m in history if m.get("role") not in ("system", "developer")]):
        cost = counter.count_message(message)
        if used + cost > budget and kept:
            break
        kept.append(dict(message))
        used += cost
    return system + kept[::-1]


def trim_messages(history: Sequence[Message], budget: int, counter: Counter,
                  model: str = "gpt-4o-mini") -> list[Message]:
    """litellm's `trim_messages(messages, model, max_tokens=budget)`, untouched.

    litellm counts with its own tokenizer; the checks recount with ctxproxy's, so a disagreement
    shows up as an over-budget request, as it would in production.
    """
    return llm.trim_messages(list(history), model=model, max_tokens=budget)

BASELINES: dict[str, Strategy] = {
    "passthrough": passthrough,
    "sliding_window": sliding_window,
    "trim_messages": trim_messages,
}
