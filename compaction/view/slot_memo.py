"""The plan's slots of a conversation's view, memoised: a resend rebuilds only what changed.

A resent history's view holds the previous request's Entry objects (compaction/view/raw_runs.py), and
their messages render to the very dicts the previous request forwarded (compaction/resend/previous.py hands
on its leading dicts). A slot is made of its entry, its message and its protection alone, so when
all three are the same as last time the slot is last time's. Summaries render to a new dict each
time and the newest groups change protection: those slots are built again. Bounded in slots held,
least recently used conversation first out.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from compaction.view.entry import Entry
from compaction.view.plan import Render, Slot, protected_positions, view_slot
from config.sized_lru import SizedLru
from store.models import Message

# About 13 resent 100k-token histories (as raw_runs.MAX_RECORDS, whose entries these slots share).
MAX_SLOTS = 4_096
SLOT_BYTES = 400  # one slot, measured (docs/operations.md "Memory"): 4,096 slots held 1.6 MiB


@dataclass(frozen=True)
class _Seen:
    entries: tuple[Entry, ...]
    slots: tuple[Slot, ...]
    messages: tuple[Message, ...]  # the slots' messages
    protected: frozenset[int]  # positions of the protected slots


class SlotMemo:
    """`slots(key, entries, render, bodies)` == the planner's `view_slots(entries, render)`,
    memoised per `key`; thread-safe. `bodies` are the request's messages by seq: `render(e)` is
    `bodies[e.seq]` for a plain message entry (raw, not elided), and a new dict for any other."""

    def __init__(self, max_slots: int = MAX_SLOTS, name: str | None = None) -> None:
        self._seen: SizedLru[str, _Seen] = SizedLru(max_slots, name=name, unit_bytes=SLOT_BYTES)

    def slots(self, key: str, entries: Sequence[Entry], render: Render,
              bodies: Mapping[int, Message]) -> list[Slot]:
        seen = self._seen.get(key)
        protected = protected_positions(entries)
        out = list(seen.slots[:len(entries)]) if seen is not None else []
        for i in _stale(seen, entries, bodies, protected) if seen is not None else range(len(entries)):
            slot = view_slot(entries[i], render(entries[i]), i in protected)
            if i < len(out):
                out[i] = slot
            else:
                out.append(slot)
        self._seen.put(key, _Seen(tuple(entries), tuple(out), tuple(map(_MESSAGE, out)), protected), len(out))
        return out

    @property
    def held(self) -> int:
        """Slots held, over every conversation."""
        return self._seen.held

    def __len__(self) -> int:
        return len(self._seen)


def _stale(seen: _Seen, entries: Sequence[Entry], bodies: Mapping[int, Message],
           protected: frozenset[int]) -> list[int]:
    """Positions whose slot is not `seen`'s, ascending: another entry, another message (compared
    in C, without rendering: see SlotMemo), a protection that changed, or past `seen`'s end."""
    same = list(map(operator.and_, map(operator.is_, entries, seen.entries),
                    map(operator.is_, map(bodies.get, map(_SEQ, entries)), seen.messages)))
    kept = len(seen.entries)
    stale = set(itertools.compress(range(len(same)), map(operator.not_, same)))
    stale |= protected | seen.protected
    return sorted(i for i in stale | set(range(kept, len(entries))) if i < len(entries))


_SEQ = operator.attrgetter("seq")
_MESSAGE = operator.attrgetter("message")
SLOT_MEMO = SlotMemo(name="view_slots")
