"""A compacted conversation through the real app: provenance in the store and in the log stream,
metric values from /metrics, response headers, one canonical `request` line per request."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import aiohttp
import openai
import pytest
from aiohttp.test_utils import TestServer

from proxy import appkeys
from proxy.observability.metrics import METRIC_NAMES
from tests.conftest import ProxyFactory, settled
from tests.fakes.upstream import FakeUpstream
from tests.proxy.observability.obs_support import (
    MODEL,
    Driven,
    drive,
    log_lines,
    parse_metrics,
    small_window_settings,
    total,
)

TURNS = 30
KEY = "sk-test-obs-0123456789abcdefghij"
HEADERS = ("x-ctxproxy-conversation-id", "x-ctxproxy-tokens-forwarded", "x-ctxproxy-compacted",
           "x-ctxproxy-overhead-ms", "x-ctxproxy-summarizer-wait")
STEP_FIELDS = ("conversation_id", "trigger", "tier", "compaction_level", "outcome", "summarizer_model",
               "summarizer_settings", "prompt_version", "source_message_ids", "source_summary_ids",
               "summary_id", "depth", "generation", "tokens_before", "tokens_after", "verification",
               "anchors_added", "anchors_superseded", "duration_ms", "event_id")


class Run:
    def __init__(self, server: TestServer, logs: io.StringIO, driven: Driven, before: str,
                 after: str) -> None:
        self.server, self.logs, self.driven = server, logs, driven
        self.before, self.after = parse_metrics(before), parse_metrics(after)
        store = server.app[appkeys.STORE]
        self.tenant = store.for_tenant(store.tenant_id_for_key(KEY))
        self.cid = driven.headers[-1]["x-ctxproxy-conversation-id"]
        self.events = self.tenant.events(self.cid)
        self.lines = log_lines(logs)


@pytest.fixture
async def run(make_proxy: ProxyFactory, fake_upstream: FakeUpstream, tmp_path: Path) -> Run:
    logs = io.StringIO()
    server = await make_proxy(small_window_settings(fake_upstream.url, tmp_path / "obs.db"),
                              log_stream=logs)
    base = str(server.make_url("")).rstrip("/")
    async with aiohttp.ClientSession() as http:
        before = await (await http.get(base + "/metrics")).text()
        client = openai.AsyncOpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0)
        driven = await drive(client, server.app, TURNS, stream_every=5)
        await client.close()
        await settled(server)
        after = await (await http.get(base + "/metrics")).text()
    return Run(server, logs, driven, before, after)


def test_compaction_happened_both_ways(run: Run) -> None:
    triggers = Counter(e.trigger for e in run.events)
    assert triggers["hard_budget"] >= 1 or triggers["threshold"] >= 1, triggers
    assert any(e.outcome == "committed" for e in run.events)
    assert run.tenant.summaries(run.cid)


def test_every_step_is_in_the_store_and_logged_once(run: Run) -> None:
    steps = [line for line in run.lines if line["event"] == "compaction.step"]
    assert [s["event_id"] for s in steps] == [e.id for e in run.events]
    by_id = {s["event_id"]: s for s in steps}
    summaries = {s.id: s for s in run.tenant.summaries(run.cid)}
    for event in run.events:
        line = by_id[event.id]
        for key in STEP_FIELDS:
            assert key in line, key
        assert (line["trigger"], line["tier"], line["compaction_level"], line["outcome"]) == (
            event.trigger, event.tier, event.level, event.outcome)
        assert (line["tokens_before"], line["tokens_after"]) == (event.tokens_before, event.tokens_after)
        # A pass trades raw messages for a smaller summary plus their anchors, whose block is
        # bounded by its share of the budget (15% of this 2,816-token budget).
        assert event.tokens_after < event.tokens_before + 2_816 * 15 // 100
        assert line["source_message_ids"] == list(event.source_message_ids)  # fewer than 256 here
        assert line["source_messages"] == len(event.source_message_ids)
        assert line["prompt_version"] and line["summarizer_model"] == "local/extractive"
        assert line["summarizer_settings"] == {"model": "local/extractive"}
        if event.outcome == "committed":
            record = summaries[str(event.summary_id)]
            assert (line["depth"], line["generation"]) == (record.depth, record.generation)
            assert line["verification"] == "passed"
            assert line["compaction_level"] == record.level == "extractive"
            sources = record.source_message_ids or record.source_summary_ids
            assert tuple(line["source_message_ids"] or line["source_summary_ids"]) == sources


def test_metrics_move_as_the_traffic_did(run: Run) -> None:
    after, before = run.after, run.before
    chat = {"route": "/v1/chat/completions", "status": "200"}
    assert total(before, "ctxproxy_requests_total", **chat) == 0
    assert total(after, "ctxproxy_requests_total", **chat) == TURNS
    assert total(after, "ctxproxy_requests_total", route="/metrics") == 1  # the first scrape
    received = total(after, "ctxproxy_tokens_received_total")
    forwarded = total(after, "ctxproxy_tokens_forwarded_total")
    # per request max(0, received - forwarded): forwarded also counts the recall tool schemas
    assert total(after, "ctxproxy_tokens_saved_total") >= received - forwarded > 0
    by_labels = Counter((e.tier, e.level, e.outcome) for e in run.events)
    for (tier, level, outcome), n in by_labels.items():
        assert total(after, "ctxproxy_compactions_total", tier=tier, level=level, outcome=outcome) == n
    assert total(after, "ctxproxy_compactions_total") == len(run.events)
    added = sum(len(e.anchors_added) for e in run.events)
    assert total(after, "ctxproxy_anchors_extracted_total") == added > 0
    assert total(after, "ctxproxy_prefix_checked_requests_total") == TURNS - 1
    stable = total(after, "ctxproxy_prefix_stable_requests_total")
    assert 0 < stable < TURNS - 1  # stable between steps, not across them
    assert sum(1 for f in run.tenant.forwarded(run.cid)) == TURNS
    calls = total(after, "ctxproxy_summarizer_latency_seconds_count")
    assert calls >= sum(1 for e in run.events if e.outcome == "committed")
    assert total(after, "ctxproxy_summarizer_errors_total") == 0
    assert total(after, "ctxproxy_upstream_latency_seconds_count") == TURNS
    assert total(after, "ctxproxy_proxy_overhead_seconds_count") == TURNS
    assert total(after, "ctxproxy_store_size_bytes") > 0
    assert total(after, "ctxproxy_budget_unused_ratio_count") == TURNS
    unused = sum(f.occupancy["free"] / f.budget for f in run.tenant.forwarded(run.cid))
    assert abs(total(after, "ctxproxy_budget_unused_ratio_sum") - unused) < 0.01 * TURNS


def test_metric_names_have_units_and_no_identifying_labels(run: Run) -> None:
    text = run.server.app[appkeys.METRICS].render().decode()
    for name in METRIC_NAMES:
        assert f"# TYPE {name} " in text, name
        assert name.endswith(("_total", "_seconds", "_bytes", "_state", "_ratio")), name
    labels = {key for _, lab in run.after for key, _ in lab}
    assert not labels & {"conversation", "conversation_id", "tenant", "tenant_id", "model"}
    assert run.cid not in text


def test_headers_on_every_completion_streaming_too(run: Run) -> None:
    forwarded = run.tenant.forwarded(run.cid)
    lines = [line for line in run.lines
             if line["event"] == "request" and line["path"] == "/v1/chat/completions"]
    for headers, record, line in zip(run.driven.headers, forwarded, lines, strict=True):
        for name in HEADERS:
            assert name in headers, name
        assert headers["x-ctxproxy-conversation-id"] == run.cid
        assert int(headers["x-ctxproxy-tokens-forwarded"]) == record.tokens_forwarded
        assert headers["x-ctxproxy-compacted"] == ("true" if record.compacted else "false")
        assert float(headers["x-ctxproxy-overhead-ms"]) == line["overhead_ms"]  # what was logged
    assert {h["x-ctxproxy-compacted"] for h in run.driven.headers} == {"true", "false"}
    waits = [h["x-ctxproxy-summarizer-wait"] for h in run.driven.headers]
    hard = [e for e in run.events if e.trigger == "hard_budget"]
    assert ("true" in waits) == bool(hard)
    assert set(waits) <= {"true", "false"}


def test_one_canonical_line_per_request(run: Run) -> None:
    requests = [line for line in run.lines if line["event"] == "request"]
    chat = [r for r in requests if r["path"] == "/v1/chat/completions"]
    assert len(chat) == TURNS
    forwarded = run.tenant.forwarded(run.cid)
    for line, record in zip(chat, forwarded, strict=True):
        assert line["conversation_id"] == run.cid and line["model"] == MODEL
        assert (line["tokens_received"], line["tokens_forwarded"]) == (record.tokens_received,
                                                                      record.tokens_forwarded)
        assert line["status"] == 200 and line["upstream_status"] == 200
        assert line["compacted"] == record.compacted
        assert line["budget_unused_ratio"] == round(record.occupancy["free"] / record.budget, 4)
        assert line["latency_ms"] >= line["overhead_ms"] >= 0
    assert [r["stream"] for r in chat].count(True) == TURNS // 5
