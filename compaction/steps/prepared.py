"""Summaries prepared ahead of need, substituted into the working view only when a step needs them.

Background steps commit summaries without moving the view (passes.py); a fork adopts its parent's
(forks.py). A step on the request path then substitutes them for the oldest chunks, only as far as
needed, without calling a summarizer. A prepared summary fits where its sources still are: a leaf
whose source messages are raw entries of the view (whole groups, none protected, nothing but raw
messages in between), a condensed one whose source summaries are consecutive entries of the view.
"""

from __future__ import annotations

from collections.abc import Sequence

from compaction.steps.passes import Candidate
from compaction.steps.selection import protected_indices
from compaction.view.entry import Entry
from compaction.view.workview import WorkingView, is_in_place
from store.interface import TenantAccess
from store.models import SummaryRecord

Fit = tuple[tuple[int, ...], SummaryRecord]  # the entries a summary replaces, and the summary


class Prepared:
    """A conversation's summaries, indexed by their first source (oldest created first)."""

    def __init__(self, summaries: Sequence[SummaryRecord]) -> None:
        self._leaf: dict[int, list[SummaryRecord]] = {}
        self._condensed: dict[str, list[SummaryRecord]] = {}
        self._discarded: set[str] = set()
        for record in summaries:
            if is_in_place(record):
                continue  # an elision stands for one message's text, never for a chunk
            if record.kind == "leaf" and record.source_message_ids:
                self._leaf.setdefault(record.source_message_ids[0], []).append(record)
            elif record.kind == "condensed" and record.source_summary_ids:
                self._condensed.setdefault(record.source_summary_ids[0], []).append(record)

    @classmethod
    def load(cls, tenant: TenantAccess, conversation_id: str) -> Prepared:
        return cls(tenant.summaries(conversation_id))

    def discard(self, summary_id: str) -> None:
        """Never offer this summary again (it would not shrink the context it was tried in)."""
        self._discarded.add(summary_id)

    def first_fit(self, wv: WorkingView, candidates: Sequence[Candidate]) -> Fit | None:
        """A prepared summary for one of `candidates` (in their order of preference), or None."""
        entries = wv.entries
        in_view = {e.ref for e in entries if e.kind == "summary"}
        protected = protected_indices(entries)
        for cand in candidates:
            first = entries[cand.chunk[0]]
            options = (self._leaf.get(first.message_id or -1, []) if cand.kind == "leaf"
                       else self._condensed.get(first.ref, []))
            for record in options:
                if record.id in in_view or record.id in self._discarded:
                    continue
                chunk = (leaf_fit(entries, record, protected) if cand.kind == "leaf"
                         else condensed_fit(entries, record))
                if chunk is not None:
                    return chunk, record
        return None


def leaf_fit(entries: Sequence[Entry], record: SummaryRecord,
             protected: frozenset[int]) -> tuple[int, ...] | None:
    """Indices of the raw entries a prepared leaf summary stands for, or None when it no longer fits."""
    index = {e.message_id: i for i, e in enumerate(entries) if e.kind == "message"}
    found = [index.get(mid) for mid in record.source_message_ids]
    if any(i is None for i in found):
        return None
    chunk = sorted(i for i in found if i is not None)
    members = set(chunk)
    if members & protected or any(entries[i].pinned for i in chunk):
        return None  # a pinned round (a message's pin, a result referred back to) stays raw
    groups = {entries[i].group for i in chunk}
    between = range(chunk[0], chunk[-1] + 1)
    if any(entries[i].group in groups and i not in members for i in range(len(entries))):
        return None  # a tool round would be split
    if any(entries[i].kind != "message" for i in between if i not in members):
        return None  # a summary in between would change places with it
    return tuple(chunk)


def condensed_fit(entries: Sequence[Entry], record: SummaryRecord) -> tuple[int, ...] | None:
    """Indices of the consecutive view summaries a prepared condensed summary stands for, or None."""
    position = {e.ref: i for i, e in enumerate(entries) if e.kind == "summary"}
    start = position.get(record.source_summary_ids[0])
    if start is None:
        return None
    chunk = tuple(range(start, start + len(record.source_summary_ids)))
    if chunk[-1] >= len(entries):
        return None
    if [entries[i].ref for i in chunk] != list(record.source_summary_ids):
        return None
    return chunk
