"""Entries of raw message runs, memoised by record identity: a resend rebuilds only its newest group.

The working view turns every run of raw stored messages into grouped `Entry`s on each request, and a
resent history is the previous run plus a message or two. Ingest hands back the same StoredMessage
records for a resent prefix (store/history/prefix_rows.py), and a record is frozen, so a run whose leading
records are the very objects of a run seen before has the same leading entries. Only the groups
before the last one they share are reused (that group may grow: a tool round gaining results); it and
everything after are built again. Bounded in records held, least recently used run first out.
"""

from __future__ import annotations

import operator
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from compaction.view.entry import Entry
from compaction.view.plan import grouped_entries
from config.sized_lru import SizedLru
from store.models import StoredMessage

# Records held across runs: about 13 resent 100k-token histories. They are mostly the ones the store
# keeps (store/history/prefix_rows.py); past its bound this keeps at most that many alive, with their entries.
MAX_RECORDS = 4_096
RECORD_BYTES = 200  # one view entry (its dataclass and list entry), about
RunKey = tuple[str, int, int]  # (conversation id, first seq, first group key)


@dataclass(frozen=True)
class _Run:
    records: tuple[StoredMessage, ...]
    entries: tuple[Entry, ...]
    starts: tuple[int, ...]  # index in `records` where each group starts
    before: tuple[int, ...]  # entries made of the records before each group


class RawRuns:
    """`entries(run, first_group)` == `raw_entries` of the run's rows, memoised; thread-safe."""

    def __init__(self, max_records: int = MAX_RECORDS, name: str | None = None) -> None:
        self._runs: SizedLru[RunKey, _Run] = SizedLru(max_records, name=name, unit_bytes=RECORD_BYTES)

    def entries(self, run: Sequence[StoredMessage], first_group: int) -> list[Entry]:
        if not run:
            return []
        key = (run[0].conversation_id, run[0].seq, first_group)
        seen = self._runs.get(key)
        kept = _reusable_groups(seen, run) if seen is not None else 0
        made = _extend(seen, kept, run, first_group) if seen is not None else _build(run, first_group)
        self._runs.put(key, made, len(made.records))
        return list(made.entries)

    @property
    def held(self) -> int:
        return self._runs.held

    def __len__(self) -> int:
        return len(self._runs)


def _reusable_groups(seen: _Run, run: Sequence[StoredMessage]) -> int:
    """How many leading groups of `seen` hold for `run`: all of them when the runs are the same
    records; else those before the group of the last shared record."""
    same = list(map(operator.is_, seen.records, run))  # in C
    shared = same.index(False) if False in same else len(same)
    if shared == len(seen.records) == len(run):
        return len(seen.starts)
    return bisect_right(seen.starts, shared - 1) - 1 if shared else 0


def _extend(seen: _Run, kept: int, run: Sequence[StoredMessage], first_group: int) -> _Run:
    """`seen`'s first `kept` groups, then the rest of `run` built from where they end."""
    if kept == len(seen.starts):
        return seen
    cut = seen.starts[kept]
    tail = _build(run[cut:], first_group + kept)
    head = seen.before[kept]
    return _Run(tuple(run), seen.entries[:head] + tail.entries,
                seen.starts[:kept] + tuple(cut + s for s in tail.starts),
                seen.before[:kept] + tuple(head + b for b in tail.before))


def _build(run: Sequence[StoredMessage], first_group: int) -> _Run:
    entries, bounds = grouped_entries([(m.message, m.seq, m.id, m.token_count, m.pinned) for m in run],
                                      first_group)
    return _Run(tuple(run), tuple(entries), tuple(b[0] for b in bounds), tuple(b[1] for b in bounds))


RAW_RUNS = RawRuns(name="raw_runs")
