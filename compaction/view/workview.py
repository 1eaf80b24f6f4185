"""The working view of a conversation: persisted view items plus newer raw messages, as `Entry`s.

The persisted view is what requests forward (summaries up to its boundary, raw messages after), and
it changes only at a step, so forwarded requests between steps share their prefix. System/developer
messages are kept aside (never summarized, always emitted first by the planner). Token counts are
the cached ones; summaries are counted once as rendered messages.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

from compaction.toolpairs import SYSTEM_ROLES
from compaction.view.backrefs import newly_referenced
from compaction.view.entry import Entry
from compaction.view.raw_runs import RAW_RUNS
from store.interface import TenantAccess
from store.models import Anchor, ContextView, Message, StoredMessage, SummaryRecord, ViewItem

_SEQ: Callable[[StoredMessage], int] = operator.attrgetter("seq")
RenderSummary = Callable[[SummaryRecord], Message]
CountMessage = Callable[[Message], int]


@dataclass(frozen=True)
class WorkingView:
    conversation_id: str
    stored: dict[int, StoredMessage]  # by seq, up to `last_seq`
    summaries: dict[str, SummaryRecord]
    entries: tuple[Entry, ...]
    system: tuple[StoredMessage, ...]
    last_seq: int
    view: ContextView | None = None
    anchor_ids: tuple[int, ...] = field(default=())
    # Version of the newest persisted view, also when `view` is only its part a shorter request covers.
    latest_version: int = 0

    def items(self) -> tuple[ViewItem, ...]:
        return tuple(ViewItem("summary", e.elided) if e.elided else ViewItem(e.kind, e.ref)
                     for e in self.entries)


def load(tenant: TenantAccess, conversation_id: str, *, last_seq: int | None,
         render: RenderSummary, count: CountMessage,
         messages: Sequence[StoredMessage] | None = None) -> WorkingView:
    """The working view up to `last_seq` (None: every stored message).

    `messages` are the conversation's stored messages when the caller already holds them (the
    request path has them from ingest), which saves reading and parsing the history again.
    """
    if messages is None:
        stored = tenant.messages(conversation_id, end_seq=None if last_seq is None else last_seq + 1)
    elif last_seq is None or max(map(_SEQ, messages), default=-1) <= last_seq:
        stored = list(messages)
    else:
        stored = [m for m in messages if m.seq <= last_seq]
    by_seq = dict(zip(map(_SEQ, stored), stored, strict=True))
    top = max(by_seq, default=-1)
    view = tenant.view(conversation_id)
    latest_version = view.version if view is not None else 0
    summaries = {s.id: s for s in tenant.summaries(conversation_id)} if view else {}
    if view is not None and (view.covered_through_seq > top or _hides(view, summaries, stored)):
        view = _within(tenant, view, summaries, by_seq, top, protected_seqs(stored))
    items: list[StoredMessage | SummaryRecord] = []
    if view is not None:
        for item in view.items:
            items.append(summaries[item.ref] if item.kind == "summary" else by_seq[int(item.ref)])
    covered = view.covered_through_seq if view else -1
    items.extend(stored if covered < 0 else (m for m in stored if m.seq > covered))
    entries = build_entries(items, render, count, by_seq)
    system = tuple(m for m in stored if m.role in SYSTEM_ROLES)
    return WorkingView(conversation_id, by_seq, summaries, tuple(entries), system, top, view,
                       view.anchor_ids if view else (), latest_version)


def protected_seqs(stored: Sequence[StoredMessage]) -> frozenset[int]:
    """Seqs a request always forwards raw: its last user message, its last message, and the
    earlier results its newest round refers back to ("unchanged since your last Read")."""
    last_user = next((m.seq for m in reversed(stored) if m.role == "user"), None)
    last = stored[-1].seq if stored else None
    return frozenset(s for s in (last_user, last) if s is not None) | newly_referenced(stored)


def _hides(view: ContextView, summaries: dict[str, SummaryRecord],
           stored: Sequence[StoredMessage]) -> bool:
    """Whether a view summary stands for a message this request must forward raw."""
    raw = {int(i.ref) for i in view.items if i.kind == "message"}
    return any(s <= view.covered_through_seq and s not in raw for s in protected_seqs(stored))


def _within(tenant: TenantAccess, view: ContextView, summaries: dict[str, SummaryRecord],
            by_seq: dict[int, StoredMessage], top: int, protect: frozenset[int]) -> ContextView | None:
    """The part of `view` this request can use, in memory only: a shorter request (a regenerated
    reply) or one whose protected messages a summary stands for.

    Keeps the leading items that end at or before `top` and cover no protected seq (later messages
    then follow raw), and the snapshot's anchors that come from those messages; nothing is saved.
    """
    kept: list[ViewItem] = []
    covered = -1
    hidden = protect - {int(i.ref) for i in view.items if i.kind == "message"}
    for item in view.items:
        record = summaries.get(item.ref) if item.kind == "summary" else None
        last = record.last_seq if record is not None else int(item.ref)
        if last > top or (record is not None and any(record.first_seq <= s <= last for s in hidden)):
            break
        kept.append(item)
        covered = last
    if not kept:
        return None
    ids = {m.id for m in by_seq.values()}
    wanted = set(view.anchor_ids)
    anchor_ids = tuple(a.id for a in tenant.anchors(view.conversation_id, include_superseded=True)
                       if a.id in wanted and (a.source_message_id is None or a.source_message_id in ids))
    return replace(view, items=tuple(kept), covered_through_seq=covered, anchor_ids=anchor_ids)


def is_in_place(record: SummaryRecord) -> bool:
    """An elision standing for one message's text, in place (its role and tool call id kept)."""
    return record.level == "elision" and record.kind == "leaf" and len(record.source_message_ids) == 1


def elided_message(source: StoredMessage, record: SummaryRecord, count: CountMessage) -> StoredMessage:
    """`source` as its in-place elision shows it: the same message, the elided text."""
    message = {**source.message, "content": record.content}
    return replace(source, message=message, token_count=count(message))


def build_entries(items: Sequence[StoredMessage | SummaryRecord], render: RenderSummary,
                  count: CountMessage, stored: Mapping[int, StoredMessage] | None = None) -> list[Entry]:
    """Entries for a mixed item list; maximal raw runs are grouped atomically. An in-place elision
    (with its source in `stored`) joins the raw run as its message, elided."""
    if all(map(isinstance, items, itertools.repeat(StoredMessage))):  # no summary: one raw run
        return RAW_RUNS.entries(cast("list[StoredMessage]", list(items)), 0)
    out: list[Entry] = []
    run: list[StoredMessage] = []
    elided: dict[int, str] = {}
    next_group = 0

    def flush() -> None:
        nonlocal next_group, run
        made = RAW_RUNS.entries(run, next_group)  # raw_entries of the run's rows, memoised
        if elided:  # only in-place elisions change an entry
            made = [replace(e, elided=elided[e.seq]) if e.seq in elided else e for e in made]
        out.extend(made)
        next_group = (max(e.group for e in made) + 1) if made else next_group
        run = []

    for item in items:
        if isinstance(item, SummaryRecord) and stored is not None and is_in_place(item):
            elided[item.first_seq] = item.id
            item = elided_message(stored[item.first_seq], item, count)
        if isinstance(item, StoredMessage):
            run.append(item)
            continue
        flush()
        out.append(summary_entry(item, render, count, next_group))
        next_group += 1
    flush()
    return out


def summary_entry(record: SummaryRecord, render: RenderSummary, count: CountMessage,
                  group: int) -> Entry:
    return Entry("summary", record.id, count(render(record)), "summary", group, record.last_seq,
                 record.depth)


def snapshot_anchor_ids(anchors: Sequence[Anchor], raw_message_ids: set[int]) -> tuple[int, ...]:
    """The anchor block of a view: active anchors whose source the view no longer shows raw (a
    fact whose message is still in the context would be paid for twice)."""
    return tuple(sorted(a.id for a in anchors if a.status == "active"
                        and (a.source_message_id is None or a.source_message_id not in raw_message_ids)))


def raw_message_ids(entries: Sequence[Entry]) -> set[int]:
    return {e.message_id for e in entries if e.kind == "message" and e.message_id is not None}
