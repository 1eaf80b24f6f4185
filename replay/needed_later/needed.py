"""What the agent needed later: identifiers it used next that it had to carry from its history.

At a request point t (`messages[:t]` is sent, `messages[t]` is the recorded assistant reply) and a
look-ahead k, the needed identifiers are those the agent wrote (content, tool-call argument values,
`program subcommand` heads of its shell commands) in the next k assistant messages a_1 = t, a_2, ...
that

- occur word-bounded in a non-system message of `messages[:t]`: the agent had to carry them;
- do not occur in the system prompt or the tool schemas: every strategy forwards those;
- for a_j with j > 1, do not occur in `messages[t:a_j]`: re-supplied after the request (by a fresh
  tool result, say), they did not have to be carried through request t.

Identifiers also present in the request's last user message are kept and flagged (`in_last_user`):
ctxproxy keeps that message by rule, so a score can be read with or without them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compaction import SYSTEM_ROLES, Message
from replay.needed_later.identifiers import Found, IdentifierExtractor, Kind
from replay.needed_later.shell import command_heads
from replay.needed_later.texts import TextIndex, authored_text, occurs, readable_text, shell_commands


@dataclass(frozen=True)
class NeededItem:
    """One identifier needed at a request point."""

    ident: str
    kind: Kind
    used_at: int  # index of the assistant message that uses it
    lookahead: int  # 1 = the reply itself, 2 = the next assistant message, ...
    last_seen: int  # index of its newest occurrence in the request's history
    in_last_user: bool  # also in the request's last user message


@dataclass(frozen=True)
class RequestNeeds:
    """The identifiers needed at one request point, up to the index's maximum look-ahead."""

    point: int
    items: tuple[NeededItem, ...]

    def select(self, k: int, *, beyond_pinned: bool = False) -> list[NeededItem]:
        """Items within look-ahead `k` (optionally without those of the last user message)."""
        return [i for i in self.items if i.lookahead <= k and not (beyond_pinned and i.in_last_user)]


def last_user_index(messages: Sequence[Message]) -> int | None:
    """Index of the last user message of `messages`, or None."""
    return next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"), None)


class NeededIndex:
    """Per-conversation precomputation: readable texts, authored identifiers, occurrence lists."""

    def __init__(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]],
                 extractor: IdentifierExtractor, max_lookahead: int = 3) -> None:
        self.messages = messages
        self.max_lookahead = max_lookahead
        self._extractor = extractor
        self._texts = [TextIndex(readable_text(m)) for m in messages]
        self._system = [m.get("role") in SYSTEM_ROLES for m in messages]
        self._assistants = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        fixed = [t.text for t, system in zip(self._texts, self._system, strict=True) if system]
        self._fixed = "\n".join([json.dumps(list(tools), ensure_ascii=False), *fixed])
        self._authored: dict[int, Found] = {}
        self._positions: dict[str, tuple[int, ...]] = {}
        self._needs: dict[int, RequestNeeds] = {}

    def authored(self, index: int) -> Found:
        """Identifiers written in assistant message `index` (cached)."""
        if index not in self._authored:
            message = self.messages[index]
            found = self._extractor.extract(authored_text(message))
            for head in command_heads(shell_commands(message)):
                found.setdefault(head, "command")
            self._authored[index] = found
        return self._authored[index]

    def positions(self, ident: str) -> tuple[int, ...]:
        """Indexes of the non-system messages whose readable text contains `ident` (cached)."""
        if ident not in self._positions:
            self._positions[ident] = tuple(i for i, text in enumerate(self._texts)
                                           if not self._system[i] and text.has(ident))
        return self._positions[ident]

    def needs(self, point: int) -> RequestNeeds:
        """The identifiers needed at request point `point`, look-ahead 1..max_lookahead (cached)."""
        if point not in self._needs:
            self._needs[point] = self._compute(point)
        return self._needs[point]

    def _compute(self, point: int) -> RequestNeeds:
        upcoming = [a for a in self._assistants if a >= point][: self.max_lookahead]
        last_user = last_user_index(self.messages[:point])
        seen: dict[str, NeededItem] = {}
        for lookahead, used_at in enumerate(upcoming, 1):
            for ident, kind in self.authored(used_at).items():
                if ident not in seen:
                    item = self._item(ident, kind, point, used_at, lookahead, last_user)
                    if item is not None:
                        seen[ident] = item
        return RequestNeeds(point, tuple(seen.values()))

    def _item(self, ident: str, kind: Kind, point: int, used_at: int, lookahead: int,
              last_user: int | None) -> NeededItem | None:
        """The needed item, or None when the identifier did not have to be carried to `point`."""
        if occurs(ident, self._fixed):
            return None
        positions = self.positions(ident)
        earlier = [i for i in positions if i < point]
        if not earlier or any(point <= i < used_at for i in positions):
            return None
        return NeededItem(ident, kind, used_at, lookahead, earlier[-1],
                          last_user is not None and last_user in earlier)
