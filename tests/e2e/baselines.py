"""The strategies ctxproxy is compared with, on the same conversation and budget.

`sliding_window`: the system prompt plus the newest whole groups (a tool round is never split)
that fit. `trim_messages`: litellm's own `trim_messages(messages, model, max_tokens=budget)`,
untouched (it counts with litellm's tokenizer; the figures recount with ctxproxy's).
"""

from __future__ import annotations

from typing import Any, Protocol

from compaction import llm
from compaction.toolpairs import SYSTEM_ROLES, group_messages

JSON = dict[str, Any]


class Counts(Protocol):
    def count_message(self, message: JSON) -> int: ...

    def count_messages(self, messages: list[JSON]) -> int: ...


def sliding_window(history: list[JSON], budget: int, counter: Counts, tools_tokens: int) -> list[JSON]:
    """System messages plus the newest whole groups within `budget` (tools included)."""
    system = [m for m in history if m.get("role") in SYSTEM_ROLES]
    rest = [m for m in history if m.get("role") not in SYSTEM_ROLES]
    used = counter.count_messages(system) + tools_tokens
    kept: list[JSON] = []
    for group in reversed(group_messages(rest)):
        part = rest[group.start:group.end]
        cost = sum(counter.count_message(m) for m in part)
        if used + cost > budget and kept:
            break
        kept[:0] = part
        used += cost
    return system + kept


def trim_messages(history: list[JSON], budget: int, model: str) -> list[JSON]:
    """litellm's trim_messages; assistant tool-call messages get `content: None` as clients send it."""
    history = [{"content": None, **m} if m.get("role") == "assistant" else m for m in history]
    return llm.trim_messages(history, model=model, max_tokens=budget)
