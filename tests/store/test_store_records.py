"""Summaries, views, anchors, compaction events, forwarded records and tool rounds."""

from __future__ import annotations

import re

import pytest

from config.errors import NotFoundError
from store.models import (
    AnchorDraft,
    CompactionEvent,
    ContextView,
    ForwardedRecord,
    SummaryDraft,
    ViewItem,
)
from store.tenant import TenantStore
from tests.store.store_helpers import TokenCounter, history


def _conv(alice: TenantStore, counter: TokenCounter, turns: int = 5,
          topic: str = "invoices") -> tuple[str, list[int]]:
    result = alice.ingest(history(turns, topic=topic), model="m", external_id=None, count_tokens=counter)
    return result.conversation.id, [m.id for m in result.messages]


def _leaf(cid: str, ids: list[int], text: str = "Intent: invoices.") -> SummaryDraft:
    return SummaryDraft(conversation_id=cid, kind="leaf", depth=0, level="normal", content=text,
                        token_count=10, first_seq=0, last_seq=len(ids) - 1,
                        source_message_ids=tuple(ids), model="local/extractive", prompt_version="v1")


def test_add_summary_assigns_id_generation_and_sources(alice: TenantStore, counter: TokenCounter) -> None:
    cid, ids = _conv(alice, counter)
    first = alice.add_summary(_leaf(cid, ids[:4]))
    second = alice.add_summary(_leaf(cid, ids[4:8]))
    assert re.fullmatch(r"sum_[0-9a-f]{12}", first.id) and first.id != second.id
    assert (first.generation, second.generation) == (1, 2)
    assert first.source_message_ids == tuple(ids[:4]) and first.created_at > 0
    condensed = alice.add_summary(SummaryDraft(
        conversation_id=cid, kind="condensed", depth=1, level="aggressive", content="merged", token_count=3,
        first_seq=0, last_seq=7, source_summary_ids=(first.id, second.id)))
    assert condensed.source_summary_ids == (first.id, second.id) and condensed.generation == 3
    assert [s.id for s in alice.summaries(cid)] == [first.id, second.id, condensed.id]
    assert alice.summary(condensed.id) == condensed


def test_summary_sources_must_exist_in_conversation(alice: TenantStore, counter: TokenCounter) -> None:
    cid, ids = _conv(alice, counter)
    other, other_ids = _conv(alice, counter, turns=1, topic="dogs")
    assert other != cid
    with pytest.raises(NotFoundError):
        alice.add_summary(_leaf(cid, [ids[0], 99_999]))
    with pytest.raises(NotFoundError):
        alice.add_summary(_leaf(cid, [other_ids[0]]))
    assert alice.summaries(cid) == []


def test_views_are_versioned(alice: TenantStore, counter: TokenCounter) -> None:
    cid, ids = _conv(alice, counter)
    assert alice.view(cid) is None
    s = alice.add_summary(_leaf(cid, ids[:4]))
    items = (ViewItem("summary", s.id), ViewItem("message", "4"))
    v1 = alice.save_view(ContextView(cid, 0, items, 4, (1, 2)))
    v2 = alice.save_view(ContextView(cid, 0, (ViewItem("summary", s.id),), 5))
    assert (v1.version, v2.version) == (1, 2)
    latest = alice.view(cid)
    assert latest == v2 and latest is not None and latest.items == (ViewItem("summary", s.id),)


def test_anchor_upsert_supersedes_and_deduplicates(alice: TenantStore, counter: TokenCounter) -> None:
    cid, ids = _conv(alice, counter)
    added, gone = alice.upsert_anchors(cid, [AnchorDraft("amount", "budget", "4000 EUR", ids[1], 1),
                                             AnchorDraft("order", "order number", "A-1", ids[1], 1)])
    assert len(added) == 2 and gone == []
    added, gone = alice.upsert_anchors(cid, [AnchorDraft("amount", "budget", "4000 EUR", ids[1], 1)])
    assert added == [] and gone == []
    added, gone = alice.upsert_anchors(cid, [AnchorDraft("amount", "budget", "5500 EUR", ids[3], 3)])
    assert [a.value for a in added] == ["5500 EUR"]
    assert [(a.value, a.status, a.superseded_by) for a in gone] == [("4000 EUR", "superseded", added[0].id)]
    assert sorted(a.value for a in alice.anchors(cid)) == ["5500 EUR", "A-1"]
    assert len(alice.anchors(cid, include_superseded=True)) == 3
    # a late extraction from an older turn does not override the newer value
    added, gone = alice.upsert_anchors(cid, [AnchorDraft("amount", "budget", "3000 EUR", ids[0], 0)])
    assert added == [] and [a.value for a in gone] == ["3000 EUR"]
    assert {a.value for a in alice.anchors(cid) if a.kind == "amount"} == {"5500 EUR"}


def test_events_round_trip(alice: TenantStore, counter: TokenCounter) -> None:
    cid, ids = _conv(alice, counter)
    event = CompactionEvent(conversation_id=cid, trigger="threshold", tier="leaf", level="normal",
                            outcome="committed", summarizer_model="gpt-4o-mini",
                            summarizer_settings={"temperature": 0.0}, prompt_version="v1",
                            source_message_ids=tuple(ids[:3]), summary_id="sum_000000000000", depth=0,
                            generation=1, tokens_before=900, tokens_after=100, verification="passed",
                            rejected_facts=("42",), anchors_added=(1,), duration_ms=12.5)
    saved = alice.record_event(event)
    assert saved.id is not None and saved.created_at > 0
    assert alice.events(cid) == [saved]


def _fwd(cid: str, hashes: tuple[str, ...]) -> ForwardedRecord:
    return ForwardedRecord(conversation_id=cid, prefix_hashes=hashes, tokens_received=100,
                           tokens_forwarded=80, budget=1000, occupancy={"system": 10, "free": 920},
                           compacted=False, view_version=0)


def test_record_forwarded_prefix_stability(alice: TenantStore, counter: TokenCounter) -> None:
    cid, _ = _conv(alice, counter)
    assert alice.record_forwarded(_fwd(cid, ("a", "b"))) is None
    assert alice.record_forwarded(_fwd(cid, ("a", "b", "c"))) is True
    assert alice.record_forwarded(_fwd(cid, ("a", "b", "c"))) is True  # identical resend keeps the prefix
    assert alice.record_forwarded(_fwd(cid, ("x", "b", "c", "d"))) is False  # rewritten prefix
    assert alice.record_forwarded(_fwd(cid, ("x",))) is False  # shorter than the previous one
    stored = alice.forwarded(cid)
    assert [(r.messages_forwarded, r.shared_prefix, r.extends_previous) for r in stored] == [
        (2, 0, None), (3, 2, True), (3, 3, True), (4, 0, False), (1, 1, False)]
    assert {r.prefix_hashes for r in stored} == {()}  # hashes are compared, not kept
    assert stored[0].occupancy == {"system": 10, "free": 920}


def test_tool_rounds_recorded_not_as_messages(alice: TenantStore, counter: TokenCounter) -> None:
    cid, ids = _conv(alice, counter)
    alice.record_tool_round(cid, [{"name": "context_search", "arguments": "{}"}], [{"content": "[]"}])
    assert alice.tool_rounds(cid)[0]["calls"][0]["name"] == "context_search"
    assert len(alice.messages(cid)) == len(ids)


def _costed(cid: str, hashes: tuple[str, ...], received: tuple[str, ...], pricing: str) -> ForwardedRecord:
    """A compacted request: forwarded messages of 600 tokens each, received ones of 500."""
    return ForwardedRecord(conversation_id=cid, prefix_hashes=hashes, tokens_received=500 * len(received),
                           tokens_forwarded=600 * len(hashes), budget=10_000, occupancy={}, compacted=True,
                           view_version=1, message_tokens=(600,) * len(hashes), received_hashes=received,
                           received_tokens=(500,) * len(received), pricing=pricing)


def test_forwarded_cost_prefix_tokens_estimates_and_cache_reads(alice: TenantStore, bob: TenantStore,
                                                                counter: TokenCounter) -> None:
    cid, _ = _conv(alice, counter)
    first = alice.record_forwarded_cost(_costed(cid, ("s", "a"), ("r1", "r2"), "anthropic"))
    assert (first.prefix_tokens, first.billed_input_estimate, first.full_history_billed_estimate) == (
        0, 1_500, 1_250)  # everything written to the cache
    alice.note_cache_read(cid, 0)
    # A step rewrote the second message: one forwarded message shared; the received history grew.
    second = alice.record_forwarded_cost(_costed(cid, ("s", "b", "c"), ("r1", "r2", "r3", "r4"), "anthropic"))
    assert (second.shared_prefix, second.prefix_tokens, second.full_prefix_tokens) == (1, 600, 1_000)
    assert second.billed_input_estimate == round(0.1 * 600 + 1.25 * 1_200) == 1_560
    assert second.full_history_billed_estimate == round(0.1 * 1_000 + 1.25 * 1_000) == 1_350
    alice.note_cache_read(cid, 590)
    bob_cid, _ = _conv(bob, counter)
    bob.record_forwarded_cost(_costed(bob_cid, ("s",), ("r1",), "openai"))
    bob.note_cache_read(cid, 7)  # another tenant's conversation: not touched
    stored = alice.forwarded(cid)
    assert [(r.prefix_tokens, r.full_prefix_tokens, r.billed_input_estimate, r.full_history_billed_estimate,
             r.cache_read_tokens) for r in stored] == [(0, 0, 1_500, 1_250, 0),
                                                       (600, 1_000, 1_560, 1_350, 590)]
    assert bob.forwarded(bob_cid)[0].cache_read_tokens is None
