"""Build the forwarded message list by priority, within the budget.

Order of the forwarded list: the client's system/developer messages (raw, from the request body,
original order; system messages ending the request stay last), then the anchor block (one system
message), then the working view (stored summaries rendered as messages, raw messages taken from the
request body with `pinned` stripped), newest last. When nothing is compacted (no summary, no anchor
block) the request body is forwarded in its original order, so a mid-conversation system message
stays where the client put it.

Token counts come from the cache (StoredMessage.token_count for messages, one count per rendered
summary); stored messages are never recounted.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Literal

from compaction.toolpairs import SYSTEM_ROLES, group_messages
from compaction.types import Occupancy
from compaction.view.entry import Entry, last_user_index
from store.models import Message, assembled

REPLY_PRIMING = 3  # tokens OpenAI adds to every request to prime the reply (see tokens.py)

Category = Literal["system", "anchors", "summaries", "fresh_tail"]
Render = Callable[[Entry], Message]


@dataclass(frozen=True)
class Slot:
    """One forwarded message with what truncation needs to know about it."""

    message: Message
    tokens: int
    category: Category
    group: int  # slots sharing a group are kept or dropped together
    ref: str  # stored message id, summary id, or "anchors"
    protected: bool = False  # system messages, the last user message, the newest group: never dropped


@dataclass(frozen=True)
class Plan:
    """The forwarded list and its accounting."""

    slots: tuple[Slot, ...]
    tools_tokens: int
    budget: int

    # Computed once per plan (a plan is frozen; the request path asks each several times).
    @cached_property
    def messages(self) -> tuple[Message, ...]:
        return tuple(s.message for s in self.slots)

    @cached_property
    def tokens(self) -> int:
        """Input tokens of the request: messages, reply priming and tool schemas."""
        return REPLY_PRIMING + sum(map(_TOKENS, self.slots)) + self.tools_tokens

    @cached_property
    def summary_ids(self) -> tuple[str, ...]:
        return tuple(s.ref for s in self.slots if s.category == "summaries")

    @cached_property
    def occupancy(self) -> Occupancy:
        by = dict.fromkeys(("system", "anchors", "summaries", "fresh_tail"), 0)
        for category, run in itertools.groupby(self.slots, _CATEGORY):  # a few runs, summed in C
            by[category] += sum(map(_TOKENS, run))
        return Occupancy(system=by["system"] + REPLY_PRIMING, anchors=by["anchors"],
                         summaries=by["summaries"], fresh_tail=by["fresh_tail"],
                         tools=self.tools_tokens, budget=self.budget)


_TOKENS: Callable[[Slot], int] = operator.attrgetter("tokens")
_CATEGORY: Callable[[Slot], Category] = operator.attrgetter("category")
MakeSlots = Callable[[Sequence[Entry], Render], list[Slot]]


@dataclass(frozen=True)
class SystemMessage:
    """A system/developer message of the request body, with its cached count."""

    message: Message
    tokens: int
    ref: str  # stored message id
    position: int  # index in the request body


def build_plan(system: Sequence[SystemMessage], anchor_block: Message | None,
               anchor_tokens: int, entries: Sequence[Entry],
               render: Callable[[Entry], Message], *, tools_tokens: int,
               budget: int, request_length: int, make_slots: MakeSlots | None = None) -> Plan:
    """The plan for `entries` (working view without system messages), before any truncation;
    `make_slots` builds the view's slots (`view_slots`, or a memo of it)."""
    view = (make_slots or view_slots)(entries, render)
    compacted = anchor_block is not None or any(e.kind == "summary" for e in entries)
    sys_slots = [Slot(m.message, m.tokens, "system", -1 - i, m.ref, True)
                 for i, m in enumerate(system)]
    if not compacted:
        return Plan(tuple(_interleave(system, sys_slots, view)), tools_tokens, budget)
    trailing = _trailing(system, request_length)
    head = [s for m, s in zip(system, sys_slots, strict=True) if m.position not in trailing]
    tail = [s for m, s in zip(system, sys_slots, strict=True) if m.position in trailing]
    if anchor_block is not None:
        view.insert(anchor_position(view), Slot(anchor_block, anchor_tokens, "anchors",
                                                -len(system) - 1, "anchors"))
    return Plan(tuple(head + view + tail), tools_tokens, budget)


def anchor_position(view: Sequence[Slot]) -> int:
    """Where the anchor block goes in the view: after its last summary (before the raw messages
    that follow it), so a step that changes the block leaves what precedes it (the task, older
    summaries) byte-identical for the provider's prompt cache; first when there is no summary."""
    last = max((i for i, s in enumerate(view) if s.category == "summaries"), default=-1)
    return last + 1


def _trailing(system: Sequence[SystemMessage], request_length: int) -> set[int]:
    """Positions of system messages that end the request: they stay last, after the view."""
    positions = {m.position for m in system}
    out: set[int] = set()
    pos = request_length - 1
    while pos in positions:
        out.add(pos)
        pos -= 1
    return out


def view_slots(entries: Sequence[Entry], render: Callable[[Entry], Message]) -> list[Slot]:
    """The slots of the working view's entries (compaction/view/slot_memo.py memoises them)."""
    protected = protected_positions(entries)
    return [view_slot(entry, render(entry), i in protected) for i, entry in enumerate(entries)]


def protected_positions(entries: Sequence[Entry]) -> frozenset[int]:
    """Positions of the messages never dropped: the last user message and the newest group's
    (a group's entries are contiguous)."""
    last_user = last_user_index(entries)
    last_group = entries[-1].group if entries else None
    newest = itertools.takewhile(lambda i: entries[i].group == last_group, range(len(entries) - 1, -1, -1))
    return frozenset(i for i in (*newest, last_user) if i is not None and entries[i].kind == "message")


def view_slot(entry: Entry, message: Message, protected: bool) -> Slot:
    """The slot forwarding `entry` as `message`."""
    category: Category = "summaries" if entry.kind == "summary" else "fresh_tail"
    ref = entry.ref if entry.kind == "summary" else str(entry.message_id or entry.ref)
    return assembled(Slot, {"message": message, "tokens": entry.tokens, "category": category,
                            "group": entry.group, "ref": ref, "protected": protected})


def _interleave(system: Sequence[SystemMessage], sys_slots: list[Slot],
                view: list[Slot]) -> list[Slot]:
    """Put system slots back at their request positions (uncompacted pass-through order)."""
    out = list(view)
    for message, slot in sorted(zip(system, sys_slots, strict=True), key=lambda p: p[0].position):
        out.insert(min(message.position, len(out)), slot)
    return out


RawRow = tuple[Message, int, int, int, bool]  # (message, seq, message_id, tokens, pinned)


def raw_entries(messages: Sequence[RawRow], first_group: int = 0) -> list[Entry]:
    """Entries for a contiguous run of raw (seq, ...) messages, grouped atomically.

    Each item is (message, seq, message_id, tokens, pinned); system/developer messages are skipped.
    Group keys start at `first_group` and are unique within the run.
    """
    return grouped_entries(messages, first_group)[0]


def grouped_entries(messages: Sequence[RawRow],
                    first_group: int = 0) -> tuple[list[Entry], list[tuple[int, int]]]:
    """`raw_entries`, and for each group (system messages' groups included: the keys count them)
    the index in `messages` where it starts and how many entries come before it."""
    out: list[Entry] = []
    bounds: list[tuple[int, int]] = []
    for ordinal, group in enumerate(group_messages([m[0] for m in messages])):
        bounds.append((group.start, len(out)))
        for message, seq, message_id, tokens, pinned in messages[group.start:group.end]:
            role = str(message.get("role"))
            if role in SYSTEM_ROLES:
                continue
            out.append(assembled(Entry, {  # Entry(...) field by field, built faster
                "kind": "message", "ref": str(seq), "tokens": tokens, "role": role,
                "group": first_group + ordinal, "seq": seq, "depth": -1, "pinned": pinned,
                "message_id": message_id, "elided": None}))
    return out, bounds


def with_tokens(entry: Entry, tokens: int) -> Entry:
    return replace(entry, tokens=tokens)
