"""A compaction pass is one transaction: anchors, summary, view and event, or nothing at all."""

from __future__ import annotations

import pytest

from config.errors import CtxProxyError, StoreError
from store.interface import PassFinisher
from store.models import (
    Anchor,
    AnchorDraft,
    CompactionEvent,
    ContextView,
    SummaryDraft,
    SummaryRecord,
    ViewItem,
)
from store.sqlite.store import Store
from store.tenant import TenantStore
from tests.store.store_helpers import TokenCounter, history, scalar

TABLES = ("anchors", "summaries", "summary_sources", "views", "compaction_events")


def _counts(store: Store) -> dict[str, int]:
    return {t: int(scalar(store, f"SELECT COUNT(*) FROM {t}")) for t in TABLES}


def _setup(alice: TenantStore,
           counter: TokenCounter) -> tuple[str, list[int], SummaryDraft, list[AnchorDraft]]:
    result = alice.ingest(history(3), model="m", external_id=None, count_tokens=counter)
    cid, ids = result.conversation.id, [m.id for m in result.messages]
    draft = SummaryDraft(cid, "leaf", 0, "normal", "Intent: invoices.", 5, 1, 4, tuple(ids[1:5]))
    return cid, ids, draft, [AnchorDraft("order", "order number", "ORD-7", ids[1], 1)]


def _finish(cid: str) -> PassFinisher:
    def finish(record: SummaryRecord, added: list[Anchor],
               superseded: list[Anchor]) -> tuple[ContextView, CompactionEvent]:
        view = ContextView(cid, 0, (ViewItem("message", "0"), ViewItem("summary", record.id)), 4,
                           tuple(a.id for a in added))
        event = CompactionEvent(cid, "manual", "leaf", "normal", "committed", "m", summary_id=record.id,
                                anchors_added=tuple(a.id for a in added))
        return view, event
    return finish


def test_commit_pass_writes_everything_together(alice: TenantStore, counter: TokenCounter) -> None:
    cid, _, draft, anchors = _setup(alice, counter)
    record, view, event = alice.commit_pass(draft, anchors, _finish(cid))
    assert [a.value for a in alice.anchors(cid)] == ["ORD-7"]
    assert view is not None
    assert alice.summaries(cid) == [record] and alice.view(cid) == view and view.version == 1
    assert alice.events(cid) == [event] and event.summary_id == record.id and event.id is not None
    assert view.anchor_ids == event.anchors_added == tuple(a.id for a in alice.anchors(cid))


@pytest.mark.parametrize("where", ["finish", "save_view", "record_event"])
def test_a_failure_in_the_middle_of_a_pass_writes_nothing(
        store: Store, alice: TenantStore, counter: TokenCounter, where: str) -> None:
    cid, _, draft, anchors = _setup(alice, counter)
    before = _counts(store)
    finish = _finish(cid)

    def failing(record: SummaryRecord, added: list[Anchor],
                superseded: list[Anchor]) -> tuple[ContextView | None, CompactionEvent]:
        assert alice.summary(record.id) == record and added  # written so far, inside the transaction
        if where == "finish":
            raise StoreError("injected")
        view, event = finish(record, added, superseded)
        assert view is not None
        if where == "save_view":
            return ContextView("conv_other", 0, view.items, 4), event  # unknown conversation
        return view, CompactionEvent("conv_other", "manual", "leaf", "normal", "committed", "m")

    with pytest.raises(CtxProxyError):  # StoreError injected, or NotFoundError from the store
        alice.commit_pass(draft, anchors, failing)
    assert _counts(store) == before
    assert alice.anchors(cid, include_superseded=True) == [] and alice.view(cid) is None


def test_a_pass_without_a_view_leaves_the_view_as_it_was(alice: TenantStore,
                                                        counter: TokenCounter) -> None:
    """A summary prepared ahead (compaction/steps/passes.py): committed with its anchors and event, the
    conversation's view untouched."""
    cid, _, draft, anchors = _setup(alice, counter)
    saved = alice.save_view(ContextView(cid, 0, (ViewItem("message", "0"),), 0))

    def prepare(record: SummaryRecord, added: list[Anchor],
                superseded: list[Anchor]) -> tuple[ContextView | None, CompactionEvent]:
        return None, CompactionEvent(cid, "threshold", "leaf", "normal", "committed", "m",
                                     summary_id=record.id)

    record, view, event = alice.commit_pass(draft, anchors, prepare)
    assert view is None and alice.view(cid) == saved
    assert alice.summaries(cid) == [record] and alice.events(cid) == [event]
    assert [a.value for a in alice.anchors(cid)] == ["ORD-7"]


def test_preview_anchors_writes_nothing(store: Store, alice: TenantStore, counter: TokenCounter) -> None:
    cid, ids, _, anchors = _setup(alice, counter)
    alice.upsert_anchors(cid, [AnchorDraft("order", "order number", "ORD-1", ids[1], 1)])
    before = _counts(store)
    preview = alice.preview_anchors(cid, [replace_seq(anchors[0], 3)])
    assert [a.value for a in preview] == ["ORD-7"]  # the correction, as upsert would leave it
    assert _counts(store) == before and [a.value for a in alice.anchors(cid)] == ["ORD-1"]


def replace_seq(draft: AnchorDraft, seq: int) -> AnchorDraft:
    return AnchorDraft(draft.kind, draft.key, draft.value, draft.source_message_id, seq)
