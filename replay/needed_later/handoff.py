"""Needed facts at a handoff: what the next call can use from the context a strategy forwarded.

A handoff at s % of a session is the request at position s % of its requests. Its needed facts are
needs.py's identifiers at look-ahead 3 (written by the agent in its next three replies, present in a
non-system message of the history, not in the system prompt or tool schemas, not re-supplied before
their use), minus those the client re-sends in that request (present in its new input: the messages
after the last assistant message, such as a fresh tool result or an environment block). A fact
counts as kept only when a whole line of the history holding it (word-bounded) is in the forwarded
text verbatim; a mention inside a reworded summary line does not count. A fact is long-range when
its newest occurrence lies more than one message budget of tokens before the request's end: out of
reach of any window of that budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from compaction import Message
from replay.needed_later.needed import NeededIndex
from replay.needed_later.texts import TextIndex, occurs, readable_text

HANDOFF_SHARES = (70, 80, 90)
HANDOFF_LOOKAHEAD = 3


@dataclass(frozen=True)
class HandoffScore:
    """One strategy at one handoff: needed facts and how many were kept verbatim."""

    share: int
    point: int
    needed: int
    kept: int
    long_range: int
    long_range_kept: int
    resent: int  # needed identifiers left out because the client re-sends them in this request


def handoff_points(points: Sequence[int], shares: Sequence[int] = HANDOFF_SHARES) -> dict[int, int]:
    """Request point -> share, for the request at each share of a session's requests."""
    if not points:
        return {}
    return {points[min(len(points) - 1, len(points) * s // 100)]: s for s in shares}


def new_input(messages: Sequence[Message], point: int) -> list[Message]:
    """The request's new input: messages[:point] after its last assistant message."""
    last = next((i for i in range(point - 1, -1, -1) if messages[i].get("role") == "assistant"), -1)
    return list(messages[last + 1:point])


def holding_lines(ident: str, message: Message) -> list[str]:
    """The non-blank lines of `message` (stripped) that hold `ident` word-bounded."""
    return [line.strip() for line in readable_text(message).split("\n") if occurs(ident, line)]


def score_handoff(index: NeededIndex, messages: Sequence[Message], point: int, share: int,
                  forwarded: str, budget: int, count: Callable[[Message], int]) -> HandoffScore:
    """Score one forwarded request (`forwarded`: its readable text) at handoff `point`."""
    fresh = TextIndex("\n".join(readable_text(m) for m in new_input(messages, point)))
    every = index.needs(point).select(HANDOFF_LOOKAHEAD)
    items = [i for i in every if not fresh.has(i.ident)]
    kept = long_range = long_kept = 0
    for item in items:
        lines = [line for pos in index.positions(item.ident) if pos < point
                 for line in holding_lines(item.ident, messages[pos]) if line]
        is_kept = any(line in forwarded for line in lines)
        is_long = sum(count(m) for m in messages[item.last_seen:point]) > budget
        kept += is_kept
        long_range += is_long
        long_kept += is_kept and is_long
    return HandoffScore(share, point, len(items), kept, long_range, long_kept, len(every) - len(items))
