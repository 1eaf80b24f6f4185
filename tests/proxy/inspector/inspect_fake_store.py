"""In-memory stand-in for store.tenant.TenantStore, for the pure inspect_view tests (same signatures)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from compaction.types import Message
from config.errors import NotFoundError
from store.encoding import forwarded
from store.history.ingest import Ahead
from store.models import (
    Anchor,
    AnchorDraft,
    CompactionEvent,
    ContextView,
    Conversation,
    ForwardedRecord,
    IngestResult,
    StoredMessage,
    SummaryDraft,
    SummaryRecord,
)


class FakeTenantStore:
    def __init__(self, tenant_id: str) -> None:
        self.tenant_id = tenant_id
        self._convs: dict[str, Conversation] = {}
        self._msgs: dict[str, list[StoredMessage]] = {}
        self._sums: dict[str, SummaryRecord] = {}
        self._views: dict[str, ContextView] = {}
        self._anchors: dict[int, Anchor] = {}
        self._events: list[CompactionEvent] = []
        self._fwd: list[ForwardedRecord] = []
        self._ids = itertools.count(1)
        self._clock = itertools.count(1_700_000_000)

    def ingest(self, messages: Sequence[Message], *, model: str, external_id: str | None,
               count_tokens: Callable[[dict[str, Any]], int],
               keys: Sequence[bytes | None] | None = None) -> IngestResult:
        cid = f"conv_{len(self._convs) + 1:04d}"
        stored = [StoredMessage(id=next(self._ids), conversation_id=cid, seq=i, role=m["role"],
                                message={k: v for k, v in m.items() if k != "pinned"},
                                token_count=count_tokens(m), chain_hash=f"h{i}", content_hash=f"c{i}",
                                pinned=bool(m.get("pinned")), created_at=float(next(self._clock)))
                  for i, m in enumerate(messages)]
        now = float(next(self._clock))
        conv = Conversation(cid, self.tenant_id, model, external_id, None, len(stored), now, now)
        self._convs[cid], self._msgs[cid] = conv, stored
        return IngestResult(conv, tuple(stored), len(stored), False)

    def read_ahead(self, messages: Sequence[Message], *, external_id: str | None,
                   keys: Sequence[bytes | None] | None = None) -> Ahead:
        return Ahead([])

    def ingest_slices(self, messages: Sequence[Message], *, model: str, external_id: str | None,
                      count_tokens: Callable[[dict[str, Any]], int],
                      keys: Sequence[bytes | None] | None = None, size: int,
                      ahead: Ahead | None = None) -> Iterator[IngestResult | None]:
        yield self.ingest(messages, model=model, external_id=external_id, count_tokens=count_tokens,
                          keys=keys)

    def conversation(self, conversation_id: str) -> Conversation:
        if conversation_id not in self._convs:
            raise NotFoundError(f"no conversation {conversation_id}")
        return self._convs[conversation_id]

    def list_conversations(self, limit: int = 50) -> list[Conversation]:
        return sorted(self._convs.values(), key=lambda c: -c.updated_at)[:limit]

    def messages(self, conversation_id: str, *, start_seq: int = 0,
                 end_seq: int | None = None) -> list[StoredMessage]:
        self.conversation(conversation_id)
        return [m for m in self._msgs[conversation_id]
                if m.seq >= start_seq and (end_seq is None or m.seq <= end_seq)]

    def add_summary(self, draft: SummaryDraft) -> SummaryRecord:
        gen = sum(1 for s in self._sums.values() if s.conversation_id == draft.conversation_id) + 1
        fields = {f.name: getattr(draft, f.name) for f in dataclasses.fields(draft)}
        rec = SummaryRecord(id=f"sum_{len(self._sums) + 1:012x}", generation=gen,
                            created_at=float(next(self._clock)), **fields)
        self._sums[rec.id] = rec
        return rec

    def summary(self, summary_id: str) -> SummaryRecord:
        if summary_id not in self._sums:
            raise NotFoundError(f"no summary {summary_id}")
        return self._sums[summary_id]

    def summaries(self, conversation_id: str) -> list[SummaryRecord]:
        return [s for s in self._sums.values() if s.conversation_id == conversation_id]

    def save_view(self, view: ContextView) -> ContextView:
        prev = self._views.get(view.conversation_id)
        saved = dataclasses.replace(view, version=(prev.version + 1) if prev else 1)
        self._views[view.conversation_id] = saved
        return saved

    def view(self, conversation_id: str) -> ContextView | None:
        return self._views.get(conversation_id)

    def upsert_anchors(self, conversation_id: str,
                       drafts: Sequence[AnchorDraft]) -> tuple[list[Anchor], list[Anchor]]:
        added, superseded = [], []
        for d in drafts:
            new = Anchor(next(self._ids), conversation_id, d.kind, d.key, d.value, d.source_message_id)
            for old in list(self._anchors.values()):
                if (old.conversation_id, old.kind, old.key, old.status) == (conversation_id, d.kind, d.key,
                                                                           "active"):
                    self._anchors[old.id] = dataclasses.replace(old, status="superseded",
                                                                superseded_by=new.id)
                    superseded.append(self._anchors[old.id])
            self._anchors[new.id] = new
            added.append(new)
        return added, superseded

    def anchors(self, conversation_id: str, *, include_superseded: bool = False) -> list[Anchor]:
        return [a for a in self._anchors.values() if a.conversation_id == conversation_id
                and (include_superseded or a.status == "active")]

    def record_event(self, event: CompactionEvent) -> CompactionEvent:
        rec = dataclasses.replace(event, id=len(self._events) + 1, created_at=float(next(self._clock)))
        self._events.append(rec)
        return rec

    def events(self, conversation_id: str) -> list[CompactionEvent]:
        return [e for e in self._events if e.conversation_id == conversation_id]

    def record_forwarded(self, rec: ForwardedRecord) -> bool | None:
        """Compared with the previous request like the real store (store/encoding/forwarded.py)."""
        return self.record_forwarded_cost(rec).extends_previous

    def record_forwarded_cost(self, rec: ForwardedRecord) -> ForwardedRecord:
        """`record_forwarded`, the record handed back with what the store sets."""
        earlier = [f for f in self._fwd if f.conversation_id == rec.conversation_id]
        tip = forwarded.pack(earlier[-1].prefix_hashes) if earlier else None
        received_tip = forwarded.pack(earlier[-1].received_hashes) if earlier else None
        tools = forwarded.tools_digests(earlier[-1]) if earlier else None
        done = forwarded.costed(rec, tip, received_tip, tools, forwarded.pack(rec.prefix_hashes),
                                forwarded.pack(rec.received_hashes))
        self._fwd.append(done)
        return done

    def note_cache_read(self, conversation_id: str, tokens: int) -> None:
        """The reported cache reads on the conversation's newest forwarded request."""
        for i in reversed(range(len(self._fwd))):
            if self._fwd[i].conversation_id == conversation_id:
                self._fwd[i] = dataclasses.replace(self._fwd[i], cache_read_tokens=tokens)
                return

    def forwarded(self, conversation_id: str) -> list[ForwardedRecord]:
        return [f for f in self._fwd if f.conversation_id == conversation_id]
