"""The inspection model over a real store: statuses, tree, anchors, events, occupancy, isolation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from config.errors import NotFoundError
from config.settings import StoreSettings
from proxy.inspector import view as inspect_view
from store.models import ContextView, SummaryDraft, ViewItem
from store.sqlite.store import Store
from store.tenant import TenantStore
from tests.proxy.inspector.inspect_fake_store import FakeTenantStore
from tests.proxy.inspector.inspect_fixtures import API_KEY, Populated
from tests.proxy.inspector.inspect_scenario import ORIGINAL_TEXT, PINNED_TEXT, count_tokens


@pytest.fixture
def tenant(populated: Populated) -> Iterator[TenantStore]:
    store = Store.open(StoreSettings(path=str(populated.db_path)))
    yield store.for_tenant(store.tenant_id_for_key(API_KEY))
    store.close()


@pytest.fixture
def data(tenant: TenantStore, populated: Populated) -> dict[str, Any]:
    return inspect_view.inspect_conversation(tenant, populated.scenario.conversation_id)


def test_timeline_marks_raw_summarized_and_pinned(data: dict[str, Any], populated: Populated) -> None:
    sc = populated.scenario
    rows = {r["seq"]: r for r in data["timeline"]}
    assert len(rows) == 40
    assert rows[0]["status"] == "raw" and rows[0]["summary_id"] is None
    assert rows[2]["status"] == "summarised"
    assert rows[2]["summary_id"] == sc.condensed.id and rows[2]["summary_depth"] == 1
    assert rows[2]["summary_path"] == [sc.condensed.id, sc.leaves[0].id]
    assert rows[2]["preview"].startswith(ORIGINAL_TEXT)
    assert rows[3]["status"] == "pinned" and rows[3]["preview"] == PINNED_TEXT
    assert rows[12]["preview"] == 'read_file({"path": "/srv/app/deploy.yaml"})'
    assert rows[31]["summary_id"] == sc.late_leaf.id and rows[31]["summary_depth"] == 0
    assert [rows[s]["status"] for s in range(35, 40)] == ["raw"] * 5
    assert data["totals"] == {"messages": 40, "message_tokens": sum(r["token_count"] for r in rows.values()),
                              "raw": 6, "summarised": 33, "pinned": 1, "summaries": 6,
                              "anchors_active": 2, "anchors_superseded": 1}


def test_summary_tree_nests_condensed_over_leaves(data: dict[str, Any], populated: Populated) -> None:
    sc = populated.scenario
    tree = data["summaries"]
    nodes = {n["id"]: n for n in tree["nodes"]}
    assert tree["roots"] == [sc.condensed.id, sc.late_leaf.id]
    assert nodes[sc.condensed.id]["children"] == [leaf.id for leaf in sc.leaves]
    assert nodes[sc.condensed.id]["status"] == "in_view"
    assert {nodes[leaf.id]["status"] for leaf in sc.leaves} == {"condensed"}
    first = nodes[sc.leaves[0].id]
    assert first["source_seqs"] == list(range(1, 9))
    provenance = (first["depth"], first["kind"], first["model"], first["prompt_version"])
    assert provenance == (0, "leaf", "local/extractive", "v1")
    assert nodes[sc.condensed.id]["generation"] == sc.condensed.generation
    assert tree["max_depth"] == 1


def test_anchors_show_supersession_both_ways(data: dict[str, Any]) -> None:
    by_value = {a["value"]: a for a in data["anchors"]}
    old, new = by_value["A-1001"], by_value["A-1002"]
    assert old["status"] == "superseded" and old["superseded_by"] == new["id"]
    assert old["superseded_by_value"] == "A-1002"
    assert new["status"] == "active" and new["supersedes"] == [old["id"]]
    assert (old["source_seq"], new["source_seq"]) == (2, 20)
    assert by_value["/srv/app/deploy.yaml"]["status"] == "active"


def test_events_keep_every_provenance_field(data: dict[str, Any], populated: Populated) -> None:
    events = data["events"]
    outcomes = [e["outcome"] for e in events]
    assert outcomes == ["committed"] * 4 + ["rejected", "committed", "committed", "failed"]
    rejected, condensed = events[4], events[5]
    assert rejected["verification"] == "failed" and rejected["rejected_facts"] == ["9999"]
    assert condensed["summary_id"] == populated.scenario.condensed.id
    assert condensed["source_summary_ids"] == [leaf.id for leaf in populated.scenario.leaves]
    assert len(condensed["anchors_added"]) == 1 and len(condensed["anchors_superseded"]) == 1
    assert events[-1]["error"] == "summarizer timed out after 60s"
    expected_keys = {"conversation_id", "trigger", "tier", "level", "outcome", "summarizer_model",
                     "summarizer_settings", "prompt_version", "source_message_ids", "source_summary_ids",
                     "summary_id", "depth", "generation", "tokens_before", "tokens_after", "verification",
                     "rejected_facts", "anchors_added", "anchors_superseded", "duration_ms", "error", "id",
                     "created_at"}
    assert all(set(e) == expected_keys for e in events)
    assert events[0]["summarizer_settings"] == {"temperature": 0.0}


def test_occupancy_series_and_prefix_stability(data: dict[str, Any]) -> None:
    occ = data["occupancy"]
    assert occ["categories"] == ["system", "anchors", "summaries", "fresh_tail", "tools", "free"]
    assert [p["request"] for p in occ["series"]] == [1, 2, 3, 4, 5, 6]
    assert [p["extends_previous"] for p in occ["series"]] == [None, True, True, False, True, True]
    latest = occ["latest"]
    assert latest == occ["series"][-1]
    assert latest["occupancy"] == {"system": 10, "anchors": 20, "summaries": 75, "fresh_tail": 420,
                                   "tools": 50, "free": 425}
    assert latest["budget"] == 1000 and latest["view_version"] == 2 and latest["compacted"] is True
    assert data["prefix_stability"] == {"requests": 6, "comparable": 5, "stable": 4, "rate": 0.8}


def test_conversation_list_counts(tenant: TenantStore, populated: Populated) -> None:
    rows = inspect_view.conversation_list(tenant)
    assert [(r["id"], r["message_count"], r["summary_count"], r["external_id"]) for r in rows] == [
        (populated.scenario.conversation_id, 40, 6, "ext-42")]


def test_another_tenants_conversation_is_not_found(tenant: TenantStore, populated: Populated) -> None:
    with pytest.raises(NotFoundError):
        inspect_view.inspect_conversation(tenant, populated.other_conversation)


def test_expand_reaches_original_messages(tenant: TenantStore, populated: Populated) -> None:
    sc = populated.scenario
    tree = inspect_view.expand_summary(tenant, sc.condensed.id)
    assert tree["type"] == "summary" and [s["id"] for s in tree["sources"]] == [leaf.id for leaf in sc.leaves]
    first_leaf = tree["sources"][0]
    assert [m["seq"] for m in first_leaf["sources"]] == list(range(1, 9))
    assert first_leaf["sources"][1]["text"] == ORIGINAL_TEXT + ". Order A-1001 is blocked."
    tool = tree["sources"][1]["sources"][4]
    assert (tool["seq"], tool["role"], tool["tool_call_id"]) == (13, "tool", "call_1")


def test_detached_summary_and_range_fallback() -> None:
    """A summary outside the view is `detached`; a leaf without message ids covers its seq range."""
    fake = FakeTenantStore("t")
    cid = fake.ingest([{"role": "user", "content": f"m{i}"} for i in range(6)], model="m", external_id=None,
                      count_tokens=count_tokens).conversation.id
    old = fake.add_summary(SummaryDraft(cid, "leaf", 0, "normal", "old", 3, 0, 2))
    new = fake.add_summary(SummaryDraft(cid, "leaf", 0, "truncation", "new", 3, 0, 3))
    fake.save_view(ContextView(cid, 0, (ViewItem("summary", new.id),), 3))
    data = inspect_view.inspect_conversation(fake, cid)
    status = {n["id"]: n["status"] for n in data["summaries"]["nodes"]}
    assert status == {old.id: "detached", new.id: "in_view"}
    assert [r["status"] for r in data["timeline"]] == ["summarised"] * 4 + ["raw"] * 2
    expanded = inspect_view.expand_summary(fake, new.id)
    assert [m["text"] for m in expanded["sources"]] == ["m0", "m1", "m2", "m3"]


@given(st.lists(st.lists(st.sampled_from("ab"), max_size=5), max_size=6))
def test_prefix_stability_matches_prefix_relation(requests: list[list[str]]) -> None:
    """A request `extends` the previous one exactly when the previous hashes are its prefix."""
    from store.models import ForwardedRecord

    fake = FakeTenantStore("t")
    cid = fake.ingest([{"role": "user", "content": "m"}], model="m", external_id=None,
                      count_tokens=count_tokens).conversation.id
    for h in requests:
        fake.record_forwarded(ForwardedRecord(cid, tuple(h), 0, 0, 10, {}, False, 0))
    series = inspect_view.occupancy_series(fake.forwarded(cid))
    for prev, cur, point in zip(requests, requests[1:], series[1:], strict=False):
        assert point["extends_previous"] == (cur[:len(prev)] == prev)
        shared = next((i for i, (a, b) in enumerate(zip(prev, cur, strict=False)) if a != b),
                      min(len(prev), len(cur)))
        assert point["shared_prefix"] == shared and point["messages_forwarded"] == len(cur)
    stability = inspect_view.prefix_stability(series)
    assert stability["comparable"] == max(0, len(requests) - 1)
    assert stability["rate"] is None or 0.0 <= stability["rate"] <= 1.0
    assert all(p["occupancy"]["free"] == 10 for p in series)
