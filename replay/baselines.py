"""Context strategies ctxproxy is compared with: (full history, budget, counter) -> forwarded list.

They are kept honest, as their users run them: passthrough forwards everything (and overflows when
the history is long); the sliding window keeps the system prompt plus the newest whole tool rounds
that fit (a careful window: it never cuts an assistant tool_calls message from its results); and
litellm's `trim_messages` is called exactly as documented with `max_tokens=budget`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Protocol

from compaction import SYSTEM_ROLES, Message, get_litellm, group_messages


class Counts(Protocol):
    def count_message(self, message: Message) -> int: ...

    def count_messages(self, messages: Sequence[Message]) -> int: ...  # framing and reply priming


Strategy = Callable[[Sequence[Message], int, Counts], list[Message]]


def passthrough(history: Sequence[Message], budget: int, counter: Counts) -> list[Message]:
    """No compaction at all: the provider sees the whole history (over budget when it is long)."""
    return [dict(m) for m in history]


def sliding_window(history: Sequence[Message], budget: int, counter: Counts,
                   tools_tokens: int = 0) -> list[Message]:
    """System messages plus the newest whole groups (tool rounds) within `budget`, tools included.

    The newest group is always kept, even alone over budget, as a plain window would send it.
    """
    system = [dict(m) for m in history if m.get("role") in SYSTEM_ROLES]
    rest = [dict(m) for m in history if m.get("role") not in SYSTEM_ROLES]
    used = counter.count_messages(system) + tools_tokens
    kept: list[Message] = []
    for group in reversed(group_messages(rest)):
        part = rest[group.start:group.end]
        cost = sum(counter.count_message(m) for m in part)
        if used + cost > budget and kept:
            break
        kept[:0] = part
        used += cost
    return system + kept


def trim_messages(history: Sequence[Message], budget: int, counter: Counts,
                  model: str = "gpt-4o-mini") -> list[Message]:
    """litellm's own `trim_messages(messages, model, max_tokens=budget)`, untouched.

    litellm counts with its own tokenizer; the checks recount with ctxproxy's, so a disagreement
    shows up as an over-budget request, as it would in production. Assistant tool-call messages
    get `content: None` as clients send them (litellm reads the key).
    """
    messages = [{"content": None, **m} if m.get("role") == "assistant" else dict(m) for m in history]
    trimmed = get_litellm().utils.trim_messages(copy.deepcopy(messages), model=model, max_tokens=budget)
    if isinstance(trimmed, tuple):  # the `return_response_tokens=True` shape
        trimmed = trimmed[0]
    return [dict(m) for m in trimmed]


def estimate_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """USD estimate from litellm's local price table; None when the model has no price."""
    try:
        prompt_cost, completion_cost = get_litellm().cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    except Exception:  # unknown model / provider: no estimate rather than a failure
        return None
    return float(prompt_cost) + float(completion_cost)


BASELINES: dict[str, Strategy] = {
    "passthrough": passthrough,
    "sliding_window": sliding_window,
    "trim_messages": trim_messages,
}
