"""What a step changes comes after what it keeps: the forwarded order the provider's prompt cache needs.

The anchor block sits right after the view's last summary (the task and older summaries before it
stay byte-identical at a step that appends summaries), and between steps it keeps its bytes even when
a newer value supersedes one of its facts.
"""

from __future__ import annotations

from pathlib import Path

from compaction.anchors.extract import extract_anchors
from compaction.tokens import TokenCounter
from compaction.view.budget import Budget
from compaction.view.entry import Entry
from compaction.view.plan import build_plan, raw_entries
from compaction.view.request_plan import anchor_block_for
from compaction.view.workview import WorkingView
from config.settings import CompactionSettings, StoreSettings
from store.factory import open_store
from tests.compaction.conftest import MODEL, asst, user

COUNTER = TokenCounter.for_model(MODEL)
ANCHORS = {"role": "system", "content": "<ctxproxy:anchors>\n- order: ORD-1\n</ctxproxy:anchors>"}


def summary(ref: str, seq: int) -> Entry:
    return Entry("summary", ref, 20, "summary", -seq - 100, seq, 0)


def test_the_anchor_block_follows_the_last_summary_and_precedes_the_raw_messages() -> None:
    task = raw_entries([(user("Fix the parser in src/app.py"), 0, 1, 10, False)])
    rest = raw_entries([(asst("looking"), 5, 6, 5, False), (user("go on"), 6, 7, 5, False)], first_group=10)
    entries = [*task, summary("sum_a", 2), summary("sum_b", 4), *rest]

    def render(e: Entry) -> dict[str, str]:
        return (
            {"role": "system", "content": e.ref}
            if e.kind == "summary"
            else {"role": "user", "content": e.ref}
        )

    plan = build_plan([], ANCHORS, 12, entries, render, tools_tokens=0, budget=10_000, request_length=8)
    assert [s.category for s in plan.slots] == [
        "fresh_tail",
        "summaries",
        "summaries",
        "anchors",
        "fresh_tail",
        "fresh_tail",
    ]
    no_summary = build_plan(
        [], ANCHORS, 12, [*task, *rest], render, tools_tokens=0, budget=10_000, request_length=4
    )
    assert no_summary.slots[0].category == "anchors"  # nothing to keep ahead of it but the system prompt


def test_a_snapshot_renders_the_same_after_one_of_its_facts_is_superseded(tmp_path: Path) -> None:
    store = open_store(StoreSettings(path=str(tmp_path / "a.db"), tenant_secret="s" * 32))
    try:
        tenant = store.for_tenant("t")
        first = [user("My email is ana@example.com"), asst("noted")]
        ingest = tenant.ingest(first, model=MODEL, external_id=None, count_tokens=lambda _m: 5)
        cid = ingest.conversation.id
        tenant.upsert_anchors(cid, extract_anchors(ingest.messages))
        snapshot = tuple(a.id for a in tenant.anchors(cid))
        wv = WorkingView(cid, {}, {}, (), (), 1, None, snapshot)
        budget = Budget.compute(CompactionSettings(), 32_000, None, 0)
        before = anchor_block_for(tenant, cid, wv, budget, COUNTER)
        assert before is not None and "ana@example.com" in str(before["content"])
        later = tenant.ingest(
            [*first, user("Correction: my email is ana.silva@example.com")],
            model=MODEL,
            external_id=None,
            count_tokens=lambda _m: 5,
        )
        _, superseded = tenant.upsert_anchors(cid, extract_anchors(later.messages))
        assert [a.value for a in superseded] == ["ana@example.com"]
        assert anchor_block_for(tenant, cid, wv, budget, COUNTER) == before  # same bytes until the next step
    finally:
        store.close()
