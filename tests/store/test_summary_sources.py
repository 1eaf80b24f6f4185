"""Summary sources: written in one statement when they are an unbroken seq run, kept once read.

A summary's sources never change, so the store keeps them after the first read (store/summaries.py
`sources_cache`); whatever path wrote them and whether they come from the cache or the database, a
summary reads back the very sources it was drafted with, in order."""

from __future__ import annotations

import pytest

from config.errors import NotFoundError
from store.interface import StoreBackend, TenantAccess
from store.models import SummaryDraft
from store.summaries import sources_cache
from tests.store.store_helpers import TokenCounter


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
