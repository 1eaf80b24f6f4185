"""Summary sources: one span row for a long run, one statement for a short run, kept once read.

A summary's sources never change, so the store keeps them after the first read (store/summaries.py
`sources_cache`); whatever path wrote them and whether they come from the cache or the database, a
summary reads back the very sources it was drafted with, in order."""

from __future__ import annotations

import pytest

from config.errors import NotFoundError
from store.interface import StoreBackend, TenantAccess
from store.models import SummaryDraft
from store.source_spans import SPAN_MIN_SOURCES
from store.summaries import sources_cache
from tests.store.store_helpers import TokenCounter, scalar


def _conversation(tenant: TenantAccess) -> tuple[str, list[int]]:
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} about job J-{i:03d}"}
            for i in range(8)]
    result = tenant.ingest(msgs, model="m", external_id=None, count_tokens=TokenCounter())
    return result.conversation.id, [m.id for m in result.messages]


def _leaf(tenant: TenantAccess, cid: str, ids: tuple[int, ...], first: int, last: int) -> str:
    return tenant.add_summary(SummaryDraft(cid, "leaf", 0, "normal", f"Jobs {first}-{last} ran.", 5, first,
                                           last, source_message_ids=ids)).id


@pytest.mark.parametrize("cached", [True, False], ids=["from the cache", "from the database"])
def test_sources_read_back_in_order(store: StoreBackend, alice: TenantAccess, cached: bool) -> None:
    cid, ids = _conversation(alice)
    run = _leaf(alice, cid, tuple(ids[0:4]), 0, 3)  # seq 0..3: one INSERT ... SELECT
    gap = _leaf(alice, cid, (ids[4], ids[6]), 4, 6)  # seq 4 and 6: row by row
    top = alice.add_summary(SummaryDraft(cid, "condensed", 1, "normal", "All jobs ran.", 4, 0, 6,
                                         source_summary_ids=(run, gap))).id
    if not cached:  # a new cache: what the database holds
        store.summary_sources = sources_cache()  # type: ignore[attr-defined]
        alice = store.for_tenant(alice.tenant_id)
    by_id = {s.id: s for s in alice.summaries(cid)}
    assert by_id[run].source_message_ids == tuple(ids[0:4])
    assert by_id[gap].source_message_ids == (ids[4], ids[6])
    assert by_id[top].source_summary_ids == (run, gap) and by_id[top].source_message_ids == ()
    assert alice.summary(gap).source_message_ids == (ids[4], ids[6])
    (expanded,) = alice.expand([run])
    assert expanded.sources == tuple(str(i) for i in ids[0:4])


def test_sources_out_of_seq_order_are_kept_as_drafted(alice: TenantAccess) -> None:
    cid, ids = _conversation(alice)
    shuffled = (ids[1], ids[0], ids[2])  # consecutive seqs, not in order: not a run
    sid = _leaf(alice, cid, shuffled, 0, 2)
    assert alice.summary(sid).source_message_ids == shuffled


def test_other_tenants_never_read_kept_sources(store: StoreBackend, alice: TenantAccess,
                                               bob: TenantAccess) -> None:
    cid, ids = _conversation(alice)
    sid = _leaf(alice, cid, tuple(ids[0:2]), 0, 1)
    alice.summaries(cid)  # kept now
    with pytest.raises(NotFoundError):
        bob.summary(sid)


def _long(tenant: TenantAccess, n: int) -> tuple[str, list[int]]:
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"step {i}"} for i in range(n)]
    result = tenant.ingest(msgs, model="m", external_id=None, count_tokens=TokenCounter())
    return result.conversation.id, [m.id for m in result.messages]


@pytest.mark.parametrize("cached", [True, False], ids=["from the cache", "from the database"])
def test_a_long_run_is_linked_as_one_span_and_reads_back_whole(store: StoreBackend, alice: TenantAccess,
                                                                 bob: TenantAccess, cached: bool) -> None:
    """A collapsed import's summary: one span row instead of a row per message, the same sources read
    back by every path (one summary, all of a conversation's, expand)."""
    bob_cid, _ = _long(bob, 8)  # another tenant's rows between nothing: spans filter by conversation
    cid, ids = _long(alice, SPAN_MIN_SOURCES + 10)
    run = tuple(ids[:SPAN_MIN_SOURCES + 5])
    sid = _leaf(alice, cid, run, 0, len(run) - 1)
    short = _leaf(alice, cid, tuple(ids[-5:-2]), len(ids) - 5, len(ids) - 3)
    assert scalar(store, "SELECT COUNT(*) FROM summary_sources WHERE summary_id = ?", (sid,)) == 0
    assert scalar(store, "SELECT COUNT(*) FROM summary_source_spans WHERE summary_id = ?", (sid,)) == 1
    assert scalar(store, "SELECT COUNT(*) FROM summary_sources WHERE summary_id = ?", (short,)) == 3
    if not cached:
        store.summary_sources = sources_cache()  # type: ignore[attr-defined]
        alice = store.for_tenant(alice.tenant_id)
    assert alice.summary(sid).source_message_ids == run
    assert {s.id: s.source_message_ids for s in alice.summaries(cid)} == {sid: run, short: tuple(ids[-5:-2])}
    (expanded,) = alice.expand([sid])
    assert expanded.sources == tuple(str(i) for i in run)
    with pytest.raises(NotFoundError):
        bob.summary(sid)
    alice.delete_conversation(cid)
    assert scalar(store, "SELECT COUNT(*) FROM summary_source_spans", ()) == 0
    assert bob.conversation(bob_cid).message_count == 8


def test_a_long_run_with_a_gap_keeps_a_row_per_source(store: StoreBackend, alice: TenantAccess) -> None:
    """Sources that are not every message of their id span (one left out) are linked row by row."""
    cid, ids = _long(alice, SPAN_MIN_SOURCES + 10)
    sources = tuple(ids[:3] + ids[4:SPAN_MIN_SOURCES + 5])
    sid = alice.add_summary(SummaryDraft(cid, "leaf", 0, "normal", "Steps ran.", 5, 0, SPAN_MIN_SOURCES + 4,
                                         source_message_ids=sources)).id
    assert scalar(store, "SELECT COUNT(*) FROM summary_source_spans", ()) == 0
    assert scalar(store, "SELECT COUNT(*) FROM summary_sources WHERE summary_id = ?", (sid,)) == len(sources)
    assert alice.summary(sid).source_message_ids == sources
