"""What compaction saved or cost, through the real app: two requests of one conversation give their
shared prefix in tokens, billed-input estimates beside the full history's and the provider's cache
reads on the `request` line, in /metrics and in the inspector's per-conversation sums."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import openai
import pytest
from aiohttp.test_utils import TestServer
from rich.console import Console

from compaction.tokens import TokenCounter
from config.settings import (
    CompactionSettings,
    LiteLLMParams,
    ModelEntry,
    Settings,
    StoreSettings,
    SummarizerSettings,
)
from proxy import appkeys
from proxy.inspector.text import render_conversation
from proxy.inspector.view import inspect_conversation
from proxy.server.warmup import WARMUP
from store.encoding.billing import billed_input
from tests.conftest import TEST_API_KEY, ProxyFactory, settled
from tests.fakes.anthropic_upstream import FakeAnthropic, MessageReply
from tests.fakes.upstream import FakeUpstream, Reply
from tests.proxy.observability.obs_support import (
    drive,
    log_lines,
    parse_metrics,
    small_window_settings,
    total,
)
from tests.sdk_params import sdk_messages

SYSTEM = "You are a careful billing assistant. " + " ".join(f"rule{i} applies." for i in range(300))
FIRST: dict[str, Any] = {"role": "user", "content": "How many invoices are overdue in account ACC-77?"}
TURNS = 24
COST_METRICS = ("ctxproxy_forwarded_prefix_tokens_total", "ctxproxy_billed_input_tokens_estimate_total",
                "ctxproxy_full_history_billed_input_tokens_estimate_total",
                "ctxproxy_provider_cache_read_tokens_total")


def request_lines(logs: io.StringIO) -> list[dict[str, Any]]:
    """The canonical `request` lines of the completions routes, in order."""
    return [x for x in log_lines(logs) if x.get("event") == "request" and x["path"].startswith("/v1/")]


async def metric_totals(server: TestServer) -> dict[str, float]:
    """The four cost counters of /metrics."""
    async with aiohttp.ClientSession() as http, http.get(server.make_url("/metrics")) as resp:
        samples = parse_metrics(await resp.text())
    return {name: total(samples, name) for name in COST_METRICS}


def inspection(server: TestServer, conversation_id: str) -> dict[str, Any]:
    """What the inspector shows of one conversation, read as the client's tenant."""
    store = server.app[appkeys.STORE]
    return inspect_conversation(store.for_tenant(store.tenant_id_for_key(TEST_API_KEY)), conversation_id)


def conversation_cost(server: TestServer, conversation_id: str) -> dict[str, Any]:
    """The inspector's per-conversation sums."""
    cost: dict[str, Any] = inspection(server, conversation_id)["cost"]
    return cost


def report(server: TestServer, conversation_id: str) -> str:
    """The `ctxproxy inspect` text report of one conversation."""
    out = io.StringIO()
    render_conversation(inspection(server, conversation_id), Console(file=out, width=240))
    return out.getvalue()



@pytest.fixture
async def logged(make_proxy: ProxyFactory, fake_upstream: FakeUpstream, fake_anthropic: FakeAnthropic,
                 tmp_path: Path) -> tuple[TestServer, io.StringIO]:
    logs = io.StringIO()
    compaction = CompactionSettings(background=False)
    models = (ModelEntry("gpt-4o-mini", LiteLLMParams("openai/gpt-4o-mini", fake_upstream.url), 128_000),
              ModelEntry("claude-test", LiteLLMParams("anthropic/claude-sonnet-4-5", fake_anthropic.url),
                         200_000, compaction))
    settings = Settings(model_list=models, compaction=compaction, store=StoreSettings(str(tmp_path / "c.db")),
                        summarizer=SummarizerSettings(model="local/extractive"))
    server = await make_proxy(settings, log_stream=logs)
    await server.app[WARMUP].done.wait()  # its imports done before a client imports the same modules
    return server, logs


async def test_chat_prefix_estimates_and_cache_reads(logged: tuple[TestServer, io.StringIO],
                                                     fake_upstream: FakeUpstream) -> None:
    server, logs = logged
    system: dict[str, Any] = {"role": "system", "content": SYSTEM}
    counter = TokenCounter.for_model("gpt-4o-mini")
    shared = counter.count_message(system) + counter.count_message(FIRST)
    assert shared >= 1_024  # OpenAI's cache discount applies
    async with openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key=TEST_API_KEY,
                                  max_retries=0) as client:
        fake_upstream.queue(Reply(text="Three are overdue."))
        await client.chat.completions.create(model="gpt-4o-mini", messages=sdk_messages([system, FIRST]))
        cached = {"prompt_tokens": 2_000, "completion_tokens": 3, "total_tokens": 2_003,
                  "prompt_tokens_details": {"cached_tokens": 1_280}}
        fake_upstream.queue(Reply(text="ACC-77.", usage=cached))
        second = [system, FIRST, {"role": "assistant", "content": "Three are overdue."},
                  {"role": "user", "content": "Which account was that?"}]
        async with client.chat.completions.with_streaming_response.create(
                model="gpt-4o-mini", messages=sdk_messages(second), stream=True,
                stream_options={"include_usage": True}) as resp:
            cid = resp.headers["x-ctxproxy-conversation-id"]
            [c async for c in await resp.parse()]
    await settled(server)
    one, two = request_lines(logs)
    assert (one["prefix_tokens"], one["billed_input_tokens_estimate"]) == (0, one["tokens_forwarded"])
    assert one["full_history_billed_estimate"] == one["tokens_received"] and one["cache_read_tokens"] is None
    assert two["prefix_tokens"] == shared and two["cache_read_tokens"] == 1_280
    expected = round(0.1 * shared + two["tokens_forwarded"] - shared)
    assert two["billed_input_tokens_estimate"] == expected == two["full_history_billed_estimate"]
    assert await metric_totals(server) == {
        "ctxproxy_forwarded_prefix_tokens_total": shared,
        "ctxproxy_billed_input_tokens_estimate_total": one["tokens_forwarded"] + expected,
        "ctxproxy_full_history_billed_input_tokens_estimate_total": one["tokens_forwarded"] + expected,
        "ctxproxy_provider_cache_read_tokens_total": 1_280}
    cost = conversation_cost(server, cid)
    assert cost == {"requests": 2, "tokens_forwarded": one["tokens_forwarded"] + two["tokens_forwarded"],
                    "prefix_tokens": shared, "cache_read_tokens": 1_280, "cache_reads_reported": 1,
                    "billed_input_estimate": one["tokens_forwarded"] + expected,
                    "full_history_billed_estimate": one["tokens_forwarded"] + expected, "saved_estimate": 0}
    text = report(server, cid)
    assert f"{shared:,} in prefixes shared with the previous request" in text
    assert "provider cache reads: 1,280 tokens (1 of 2 replies reported them)" in text
    assert f"billed input (estimate): {one['tokens_forwarded'] + expected:,} tokens" in text
    assert "compaction saved 0" in text


async def test_messages_at_anthropic_prices(logged: tuple[TestServer, io.StringIO],
                                            fake_anthropic: FakeAnthropic) -> None:
    server, logs = logged
    history: list[Any] = [{"role": "user", "content": "Summarise invoice INV-2093 for me, please."}]
    async with anthropic.AsyncAnthropic(base_url=str(server.make_url("")).rstrip("/"), api_key=TEST_API_KEY,
                                        max_retries=0) as client:
        fake_anthropic.queue(MessageReply(text="It is paid."))
        first = await client.messages.with_raw_response.create(model="claude-test", max_tokens=64,
                                                               system=SYSTEM, messages=history)
        cid = first.headers["x-ctxproxy-conversation-id"]
        history += [{"role": "assistant", "content": "It is paid."}, {"role": "user", "content": "When?"}]
        fake_anthropic.queue(MessageReply(text="In May.", cache_read=900))
        async with client.messages.stream(model="claude-test", max_tokens=64, system=SYSTEM,
                                          messages=history) as stream:
            await stream.get_final_message()
    await settled(server)
    one, two = request_lines(logs)
    assert one["billed_input_tokens_estimate"] == round(1.25 * one["tokens_forwarded"])
    prefix = two["prefix_tokens"]
    assert prefix > 0 and two["cache_read_tokens"] == 900
    assert two["billed_input_tokens_estimate"] == billed_input("anthropic", prefix, two["tokens_forwarded"])
    rest = two["tokens_forwarded"] - prefix
    assert two["billed_input_tokens_estimate"] == round(0.1 * prefix + 1.25 * rest)
    cost = conversation_cost(server, cid)
    assert (cost["prefix_tokens"], cost["cache_read_tokens"]) == (prefix, 900)
    billed = one["billed_input_tokens_estimate"] + two["billed_input_tokens_estimate"]
    assert cost["billed_input_estimate"] == billed


def test_openai_prices_discount_only_a_long_prefix() -> None:
    assert billed_input("openai", 1_000, 3_000) == 3_000
    assert billed_input("openai", 2_000, 3_000) == 1_200
    assert billed_input("anthropic", 2_000, 3_000) == 1_450
    assert billed_input("anthropic", 0, 1_000) == 1_250



async def test_responses_cache_reads_streaming_and_not(logged: tuple[TestServer, io.StringIO],
                                                      fake_upstream: FakeUpstream) -> None:
    server, logs = logged
    first: list[Any] = [{"role": "user", "content": "List the overdue invoices of ACC-77."}]
    async with openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key=TEST_API_KEY,
                                  max_retries=0) as client:
        fake_upstream.queue(Reply(text="INV-1 and INV-2."))
        await client.responses.create(model="gpt-4o-mini", instructions=SYSTEM, input=first)
        fake_upstream.queue(Reply(text="Both from May."))
        second = [*first, {"role": "assistant", "content": "INV-1 and INV-2."},
                  {"role": "user", "content": "From when?"}]
        async with client.responses.stream(model="gpt-4o-mini", instructions=SYSTEM, input=second) as stream:
            await stream.get_final_response()
    await settled(server)
    one, two = request_lines(logs)
    assert (one["cache_read_tokens"], two["cache_read_tokens"]) == (0, 0)  # the fake reports none cached
    assert one["prefix_tokens"] == 0 and two["prefix_tokens"] >= 1_024
    expected = billed_input("openai", two["prefix_tokens"], two["tokens_forwarded"])
    assert two["billed_input_tokens_estimate"] == expected < two["tokens_forwarded"]
    totals = await metric_totals(server)
    assert totals["ctxproxy_provider_cache_read_tokens_total"] == 0
    assert totals["ctxproxy_forwarded_prefix_tokens_total"] == two["prefix_tokens"]


async def test_a_compacted_conversation_sums_alike_everywhere(make_proxy: ProxyFactory,
                                                              fake_upstream: FakeUpstream,
                                                              tmp_path: Path) -> None:
    logs = io.StringIO()
    server = await make_proxy(small_window_settings(fake_upstream.url, tmp_path / "w.db"), log_stream=logs)
    await server.app[WARMUP].done.wait()
    async with openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key=TEST_API_KEY,
                                  max_retries=0) as client:
        driven = await drive(client, server.app, TURNS, stream_every=4)
    await settled(server)
    lines = request_lines(logs)
    assert len(lines) == TURNS and any(x["compacted"] for x in lines)
    sums = {k: sum(x[k] for x in lines) for k in ("prefix_tokens", "billed_input_tokens_estimate",
                                                    "full_history_billed_estimate")}
    assert await metric_totals(server) == {
        "ctxproxy_forwarded_prefix_tokens_total": sums["prefix_tokens"],
        "ctxproxy_billed_input_tokens_estimate_total": sums["billed_input_tokens_estimate"],
        "ctxproxy_full_history_billed_input_tokens_estimate_total": sums["full_history_billed_estimate"],
        "ctxproxy_provider_cache_read_tokens_total": 0}
    cost = conversation_cost(server, driven.headers[-1]["x-ctxproxy-conversation-id"])
    assert (cost["prefix_tokens"], cost["billed_input_estimate"], cost["full_history_billed_estimate"]) == (
        sums["prefix_tokens"], sums["billed_input_tokens_estimate"], sums["full_history_billed_estimate"])
    saved = sums["full_history_billed_estimate"] - sums["billed_input_tokens_estimate"]
    assert cost["saved_estimate"] == saved
    for x in lines:  # each estimate at OpenAI's prices of its own prefix
        assert x["billed_input_tokens_estimate"] == billed_input("openai", x["prefix_tokens"],
                                                                 x["tokens_forwarded"])
        assert x["full_history_billed_estimate"] <= x["tokens_received"]
    compacted = [x for x in lines if x["tokens_forwarded"] < x["tokens_received"]]
    assert compacted and all(x["full_history_billed_estimate"] != x["billed_input_tokens_estimate"]
                             for x in compacted)


def shell_tool(description: str) -> dict[str, Any]:
    """A chat tool schema; another description is another schema (a cache break)."""
    return {"type": "function", "function": {"name": "shell", "description": description,
                                             "parameters": {"type": "object",
                                                            "properties": {"cmd": {"type": "string"}}}}}


async def test_tool_schemas_lead_the_prefix(logged: tuple[TestServer, io.StringIO],
                                            fake_upstream: FakeUpstream) -> None:
    server, logs = logged
    history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, FIRST]
    counter = TokenCounter.for_model("gpt-4o-mini")
    async with openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key=TEST_API_KEY,
                                  max_retries=0) as client:
        for turn, description in enumerate(("Run a command.", "Run a command.", "Run one command.")):
            fake_upstream.queue(Reply(text=f"answer {turn}"))
            raw = await client.chat.completions.with_raw_response.create(
                model="gpt-4o-mini", messages=sdk_messages(history), tools=[shell_tool(description)])  # type: ignore[list-item]
            history += [{"role": "assistant", "content": f"answer {turn}"},
                        {"role": "user", "content": f"next {turn}"}]
    await settled(server)
    series = inspection(server, raw.headers["x-ctxproxy-conversation-id"])["occupancy"]["series"]
    tools = series[1]["occupancy"]["tools"]
    one, two, three = request_lines(logs)
    assert tools > 0 and one["prefix_tokens"] == 0
    assert two["prefix_tokens"] == tools + sum(map(counter.count_message, history[:2]))
    assert three["prefix_tokens"] == 0  # the tool schema changed: nothing after it is cached
    assert three["billed_input_tokens_estimate"] == three["tokens_forwarded"]
