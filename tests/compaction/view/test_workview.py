"""The working view of a request shorter than the persisted view keeps what still fits."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compaction.engine import Engine
from compaction.types import Message
from compaction.view import workview
from config.settings import StoreSettings
from store.models import AnchorDraft, ContextView, SummaryDraft, SummaryRecord, ViewItem
from store.sqlite.store import Store
from store.tenant import TenantStore
from tests.compaction.conftest import asst
from tests.compaction.test_engine import history, make_engine, turn
from tests.fakes.summarizer import ScriptedSummarizer


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(StoreSettings(path=str(tmp_path / "t.db"), tenant_secret="x" * 32))
    yield s
    s.close()


def _render(record: SummaryRecord) -> dict[str, Any]:
    return {"role": "user", "content": record.content}


def _count(message: Message) -> int:
    return len(str(message.get("content")))


def _summary(tenant: TenantStore, cid: str, ids: dict[int, int], first: int, last: int) -> str:
    draft = SummaryDraft(cid, "leaf", 0, "normal", f"summary {first}-{last}", 5, first, last,
                         tuple(ids[s] for s in range(first, last + 1)))
    return tenant.add_summary(draft).id


def test_shorter_request_keeps_the_view_items_it_covers(store: Store) -> None:
    tenant = store.for_tenant("t")
    msgs = [{"role": "user" if i % 2 else "system" if i == 0 else "assistant", "content": f"m{i}"}
            for i in range(10)]
    result = tenant.ingest(msgs, model="m", external_id=None, count_tokens=_count)
    cid = result.conversation.id
    ids = {m.seq: m.id for m in result.messages}
    s1, s2 = _summary(tenant, cid, ids, 1, 4), _summary(tenant, cid, ids, 5, 8)
    kept_anchor = tenant.upsert_anchors(cid, [AnchorDraft("id", "order", "ORD-1", ids[2], 2)])[0][0]
    late_anchor = tenant.upsert_anchors(cid, [AnchorDraft("id", "ticket", "T-9", ids[7], 7)])[0][0]
    items = (ViewItem("message", "0"), ViewItem("summary", s1), ViewItem("summary", s2),
             ViewItem("message", "9"))
    saved = tenant.save_view(ContextView(cid, 0, items, 9, (kept_anchor.id, late_anchor.id)))
    wv = workview.load(tenant, cid, last_seq=6, render=_render, count=_count)
    assert [(e.kind, e.ref) for e in wv.entries if e.kind == "summary"] == [("summary", s1)]
    assert [e.seq for e in wv.entries if e.kind == "message"] == [5, 6]  # after s1: raw up to seq 6
    assert wv.view is not None and wv.view.covered_through_seq == 4
    assert wv.anchor_ids == (kept_anchor.id,)  # the anchor from seq 7 is beyond the request
    assert wv.latest_version == saved.version and wv.last_seq == 6
    assert tenant.view(cid) == saved  # nothing persisted
    too_short = workview.load(tenant, cid, last_seq=3, render=_render, count=_count)
    assert [(e.kind, e.seq) for e in too_short.entries] == [("message", s) for s in (1, 2, 3)]


async def test_regenerated_reply_is_planned_over_the_existing_summaries(store: Store) -> None:
    summarizer = ScriptedSummarizer("faithful")
    engine: Engine = make_engine(store, summarizer)
    msgs = history(48, words=40)
    first = await engine.prepare(turn(msgs))
    engine.record_reply(first, turn(msgs), asst("Your first order was ORD-1000."))
    assert await engine.compact(turn(msgs), first.conversation_id, "manual")  # an operator's step
    tenant = store.for_tenant("tenant-a")
    view = tenant.view(first.conversation_id)
    assert view is not None and view.covered_through_seq == len(msgs)  # includes the reply
    summaries, calls = len(tenant.summaries(first.conversation_id)), summarizer.call_count
    regen = await engine.prepare(turn(msgs))  # the same request again: regenerate the reply
    assert regen.conversation_id == first.conversation_id
    assert regen.summary_ids and not regen.events and not regen.waited_on_summarizer
    assert regen.tokens_forwarded < first.tokens_forwarded
    assert list(regen.messages)[-1] == msgs[-1]
    assert tenant.view(first.conversation_id) == view  # nothing re-summarized or saved
    assert len(tenant.summaries(first.conversation_id)) == summaries and summarizer.call_count == calls
    await engine.aclose()
