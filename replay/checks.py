"""Measurements of one replayed request: tokens, budget, tool pairing, kept system/last user, prefix.

Independent of the code under test on purpose: pairing and presence are computed here with their
own simple rules rather than with compaction.toolpairs, so a bug shared by the engine and its
validator cannot hide itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compaction import REPLY_PRIMING, Message, TokenCounter
from replay.records import Check
from store.encoding.content import message_text


def context_text(messages: Sequence[Message]) -> str:
    """All text of `messages`, one message per line block."""
    return "\n".join(message_text(m) for m in messages)


def _identity(message: Message) -> str:
    """What makes two messages the same message for the checks (role, text, call ids, arguments)."""
    calls = [(c.get("id"), (c.get("function") or {}).get("arguments"))
             for c in message.get("tool_calls") or ()]
    return json.dumps([message.get("role"), message_text(message), message.get("tool_call_id"), calls],
                      sort_keys=True, default=str)


def message_identity(message: Message) -> str:
    """The checks' notion of "the same message" as a string key (role, text, call ids, arguments)."""
    return _identity(message)


class CachedCounter:
    """A TokenCounter that remembers each distinct message's count (replays recount the same
    history hundreds of times): by object first (the recorded history is the same objects every
    request), then by content."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._memo: dict[str, int] = {}
        self._by_object: dict[int, tuple[Message, int]] = {}  # the message is held: its id stays unique

    def count_message(self, message: Message) -> int:
        seen = self._by_object.get(id(message))
        if seen is not None and seen[0] is message:
            return seen[1]
        key = _identity(message)
        if key not in self._memo:
            self._memo[key] = self.counter.count_message(message)
        self._by_object[id(message)] = (message, self._memo[key])
        return self._memo[key]

    def count_messages(self, messages: Sequence[Message]) -> int:
        return REPLY_PRIMING + sum(self.count_message(m) for m in messages)

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        return self.counter.count_tools(list(tools))


Counter = TokenCounter | CachedCounter


def synthetic_messages(forwarded: Sequence[Message], history: Sequence[Message]) -> list[Message]:
    """Forwarded messages that are not verbatim client/reply messages (anchor block, summaries, cuts)."""
    known = {_identity(m) for m in history}
    return [m for m in forwarded if _identity(m) not in known]


def pairing_violations(messages: Sequence[Message]) -> list[str]:
    """`orphan:<id>` for a tool result without its call right before, `unanswered:<id>` for a call
    without its result before the next non-tool message (or the end of the list)."""
    problems: list[str] = []
    pending: set[str] = set()
    in_round = False
    for message in messages:
        role = message.get("role")
        if role == "tool":
            call_id = str(message.get("tool_call_id"))
            if in_round and call_id in pending:
                pending.discard(call_id)
            else:
                problems.append(f"orphan:{call_id}")
            continue
        problems += [f"unanswered:{c}" for c in sorted(pending)]
        calls = (message.get("tool_calls") or ()) if role == "assistant" else ()
        pending = {str(c.get("id")) for c in calls}
        in_round = bool(pending)
    return problems + [f"unanswered:{c}" for c in sorted(pending)]


@dataclass(frozen=True)
class RequestCheck:
    """Figures of one forwarded request."""

    tokens_received: int
    tokens_forwarded: int  # tool schemas included
    budget: int
    pairing: tuple[str, ...]
    system_present: bool
    last_user_present: bool
    extends_previous: bool | None
    facts_present: int

    @property
    def over_budget(self) -> bool:
        return self.tokens_forwarded > self.budget

    def to_dict(self) -> dict[str, Any]:
        return {"tokens_received": self.tokens_received, "tokens_forwarded": self.tokens_forwarded,
                "budget": self.budget, "over_budget": self.over_budget, "pairing": list(self.pairing),
                "system_present": self.system_present, "last_user_present": self.last_user_present,
                "extends_previous": self.extends_previous, "facts_present": self.facts_present}


def _present(needle: Message | None, haystack: Sequence[Message]) -> bool:
    if needle is None:
        return True
    key = _identity(needle)
    return any(_identity(m) == key for m in haystack)


def _last(messages: Sequence[Message], roles: tuple[str, ...]) -> Message | None:
    return next((m for m in reversed(messages) if m.get("role") in roles), None)


def extends(previous: Sequence[Message] | None, current: Sequence[Message]) -> bool | None:
    """Whether `current` starts with every message of `previous` (None for a first request)."""
    if previous is None:
        return None
    if len(current) < len(previous):
        return False
    return all(_identity(a) == _identity(b) for a, b in zip(previous, current, strict=False))


def check_request(sent: Sequence[Message], forwarded: Sequence[Message], *, budget: int,
                  counter: Counter, tools: Sequence[Mapping[str, Any]] = (),
                  previous: Sequence[Message] | None = None,
                  checks: Sequence[Check] = ()) -> RequestCheck:
    """Everything measured about one request: what the client sent vs what the provider got."""
    tools_tokens = counter.count_tools(tools)
    system = next((m for m in sent if m.get("role") in ("system", "developer")), None)
    text = context_text(forwarded)
    return RequestCheck(
        tokens_received=counter.count_messages(sent) + tools_tokens,
        tokens_forwarded=counter.count_messages(forwarded) + tools_tokens,
        budget=budget, pairing=tuple(pairing_violations(forwarded)),
        system_present=_present(system, forwarded),
        last_user_present=_present(_last(sent, ("user",)), forwarded),
        extends_previous=extends(previous, forwarded),
        facts_present=sum(1 for c in checks if c.fact in text))
