"""The model recalls a compacted fact through the proxy's own tools, end to end.

Real app, real engine (local/extractive summarizer, a 4096-token window so a summary replaces the
early turns), the fake upstream playing a model that searches, expands and answers, and the
official openai SDK as the client, streamed and not.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp.test_utils import TestServer
from openai.types.chat import ChatCompletion
from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall

from config.settings import (
    CompactionSettings,
    LiteLLMParams,
    ModelEntry,
    RecallSettings,
    Settings,
    StoreSettings,
    SummarizerSettings,
)
from proxy import appkeys
from tests.conftest import TEST_API_KEY, ProxyFactory, settled
from tests.fakes.upstream import ErrorReply, FakeUpstream, Reply, tool_call
from tests.proxy.recall.recall_data import FACT
from tests.sdk_params import sdk_messages, sdk_tools

JSON = dict[str, Any]
SEARCH, EXPAND = "context_search", "context_expand"
CLIENT_TOOL: JSON = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TOPICS = ["gardening", "astronomy", "cycling", "baking", "chess", "sailing", "pottery", "hiking",
          "painting", "fishing", "knitting", "birding", "climbing", "surfing", "juggling"]


def settings(upstream_url: str, tmp_path: Path, recall_enabled: bool = True) -> Settings:
    compaction = CompactionSettings(background=False)
    model = ModelEntry("gpt-4o-mini", LiteLLMParams("openai/gpt-4o-mini", upstream_url), 4096, compaction)
    return Settings(model_list=(model,), compaction=compaction, store=StoreSettings(str(tmp_path / "s.db")),
                    summarizer=SummarizerSettings(model="local/extractive"),
                    recall=RecallSettings(enabled=recall_enabled))


def long_history() -> list[JSON]:
    """A planted fact at turn 2, then enough chatter that the early turns must be summarized."""
    history: list[JSON] = [{"role": "system", "content": "You are a helpful shop assistant."},
                           {"role": "user", "content": "Hello, I need help with an order."},
                           {"role": "assistant", "content": "Of course, what is the order?"},
                           {"role": "user", "content": FACT + "."},
                           {"role": "assistant", "content": "Thank you, I have noted it."}]
    for i, topic in enumerate(TOPICS * 4):
        history.append({"role": "user", "content": f"Question {i}: tell me something about {topic}. "
                        f"I have been curious about {topic} for a long while and want a detailed, "
                        f"friendly explanation of how beginners usually get started with {topic}."})
        history.append({"role": "assistant", "content": f"Answer {i}: {topic} rewards patience. "
                        f"Beginners in {topic} usually start with simple equipment, join a local group, "
                        f"practise a little every week and keep notes about what worked."})
    history.append({"role": "user", "content": "What was my order number again, and for whom?"})
    return history


def _called(messages: list[JSON], call_id: str) -> str:
    for m in messages:
        for c in m.get("tool_calls") or []:
            if c["id"] == call_id:
                return str(c["function"]["name"])
    return ""


def recalling_model(body: JSON) -> Reply:
    """The fake model: with a summary in view and the tools offered, it searches, expands, answers."""
    messages = body["messages"]
    offered = {t["function"]["name"] for t in body.get("tools", [])}
    last = messages[-1]
    if last["role"] == "tool":
        result = json.loads(last["content"])
        if _called(messages, last["tool_call_id"]) == SEARCH:
            hit = next(h for h in result["hits"] if h["kind"] == "message")
            return Reply(text=None, tool_calls=[tool_call("call_expand", EXPAND, {"ids": [hit["id"]]})])
        return Reply(text="From the history: " + result["items"][0]["text"])
    summarized = any("<ctxproxy:summary" in str(m.get("content")) for m in messages)
    if summarized and SEARCH in offered:
        return Reply(text=None, tool_calls=[tool_call("call_search", SEARCH, {"pattern": "Halvorsen"})])
    return Reply(text="I cannot look that up.")


async def start(make_proxy: ProxyFactory, fake: FakeUpstream, tmp_path: Path,
                recall_enabled: bool = True) -> TestServer:
    fake.responder = recalling_model
    return await make_proxy(settings(fake.url, tmp_path, recall_enabled))


def client(server: TestServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key=TEST_API_KEY, max_retries=0)


async def ask(server: TestServer, stream: bool, **extra: Any) -> tuple[str, str, list[Any], Any]:
    """(conversation id, content, tool calls seen by the client, finish reason)."""
    sdk = client(server)
    raw = await sdk.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=sdk_messages(long_history()), tools=sdk_tools([CLIENT_TOOL]),
        tool_choice="auto", stream=stream, **extra)
    cid = raw.headers["x-ctxproxy-conversation-id"]
    parsed = raw.parse()
    if isinstance(parsed, ChatCompletion):  # stream=False
        choice = parsed.choices[0]
        return cid, choice.message.content or "", list(choice.message.tool_calls or []), choice.finish_reason
    text: list[str] = []
    calls: list[ChoiceDeltaToolCall] = []
    finishes: list[str] = []
    async for chunk in parsed:
        for streamed in chunk.choices:
            text.append(streamed.delta.content or "")
            calls += streamed.delta.tool_calls or []
            if streamed.finish_reason:
                finishes.append(streamed.finish_reason)
    assert len(finishes) == 1
    return cid, "".join(text), calls, finishes[0]


def assert_rounds_append_or_make_room(first: list[JSON], reask: list[JSON]) -> None:
    """A re-ask is the first request plus the rounds; when the rounds need room, a run of the
    oldest raw turns gives way behind one pointer line (system messages and the newest stay)."""
    pointers = [i for i, m in enumerate(reask) if "to make room for recall results" in str(m["content"])]
    assert len(pointers) <= 1
    kept = [m for i, m in enumerate(reask) if i not in pointers]
    gap = len(first) - len(kept)
    at = pointers[0] if pointers else len(kept)
    assert kept == first[:at] + first[at + gap:]  # one contiguous run left out, nothing reordered
    assert all(m in kept for m in first if m["role"] == "system") and kept[-1] == first[-1]


def tool_names(body: JSON) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_model_recalls_a_compacted_fact(make_proxy: ProxyFactory, fake_upstream: FakeUpstream,
                                              tmp_path: Path,
                                              stream: bool) -> None:
    server = await start(make_proxy, fake_upstream, tmp_path)
    cid, content, calls, finish = await ask(server, stream)

    # The client sees an ordinary completion carrying the planted fact, and nothing of our tools.
    assert FACT in content and finish == "stop" and calls == []
    # The upstream saw the summary, our tools next to the client's, and the tool results.
    bodies = [r.body for r in fake_upstream.requests]
    assert len(bodies) == 3
    first = bodies[0]
    assert any("<ctxproxy:summary" in str(m.get("content")) for m in first["messages"])
    assert {"role": "user", "content": FACT + "."} not in first["messages"]  # its turn was compacted
    assert first["tools"][0] == CLIENT_TOOL and tool_names(first) == ["get_weather", SEARCH, EXPAND]
    assert all(b["tool_choice"] == "auto" and b["tools"][0] == CLIENT_TOOL for b in bodies)
    assert bodies[1]["messages"][-2]["tool_calls"][0]["function"]["name"] == SEARCH
    assert bodies[2]["messages"][-1]["role"] == "tool" and FACT in bodies[2]["messages"][-1]["content"]
    assert_rounds_append_or_make_room(first["messages"], bodies[2]["messages"][:-4])

    # Stored: the client's history plus the final reply; the proxy's round only in the audit table.
    await settled(server)
    tenant = server.app[appkeys.STORE].for_tenant(server.app[appkeys.STORE].tenant_id_for_key(TEST_API_KEY))
    stored = tenant.messages(cid)
    assert len(stored) == len(long_history()) + 1
    assert stored[-1].role == "assistant" and FACT in stored[-1].message["content"]
    assert not stored[-1].message.get("tool_calls")
    assert not any(m.role == "tool" or SEARCH in json.dumps(m.message) for m in stored)
    rounds = tenant.tool_rounds(cid)
    assert [r["calls"][0]["function"]["name"] for r in rounds] == [SEARCH, EXPAND]
    assert FACT in rounds[1]["results"][0]["content"]
    assert not any(SEARCH in s.content or '"hits"' in s.content for s in tenant.summaries(cid))


async def test_usage_is_summed_over_rounds(make_proxy: ProxyFactory, fake_upstream: FakeUpstream,
                                           tmp_path: Path) -> None:
    server = await start(make_proxy, fake_upstream, tmp_path)
    reply = await client(server).chat.completions.create(model="gpt-4o-mini",
                                                         messages=sdk_messages(long_history()))
    assert reply.usage is not None and len(fake_upstream.requests) == 3
    assert reply.usage.prompt_tokens > 2 * sum(len(json.dumps(m)) // 4
                                               for m in fake_upstream.requests[0].body["messages"])


async def test_client_tool_calls_pass_through_mixed_rounds(make_proxy: ProxyFactory,
                                                           fake_upstream: FakeUpstream,
                                                           tmp_path: Path) -> None:
    server = await start(make_proxy, fake_upstream, tmp_path)
    fake_upstream.responder = lambda body: Reply(text=None, tool_calls=[
        tool_call("call_s", SEARCH, {"pattern": "Halvorsen"}),
        tool_call("call_w", "get_weather", {"city": "Oslo"})])
    for stream in (False, True):
        _, _, calls, finish = await ask(server, stream)
        assert finish == "tool_calls" and len(calls) in (1, 3)  # one call, streamed as 3 deltas
        assert {c.function.name for c in calls if c.function.name} == {"get_weather"}
        assert {c.index for c in calls if hasattr(c, "index")} <= {0}
        if stream:
            assert "".join(c.function.arguments or "" for c in calls) == '{"city": "Oslo"}'
    assert len(fake_upstream.requests) == 2  # no recall round ran


async def test_upstream_error_in_a_later_round(make_proxy: ProxyFactory, fake_upstream: FakeUpstream,
                                              tmp_path: Path) -> None:
    server = await start(make_proxy, fake_upstream, tmp_path)
    failing = {"error": {"message": "overloaded", "type": "server_error", "param": None, "code": "busy"}}

    def model(body: JSON) -> Any:
        return ErrorReply(503, failing) if body["messages"][-1]["role"] == "tool" else recalling_model(body)

    fake_upstream.responder = model
    with pytest.raises(openai.InternalServerError) as info:
        await client(server).chat.completions.create(model="gpt-4o-mini",
                                                     messages=sdk_messages(long_history()))
    assert info.value.status_code == 503 and "overloaded" in info.value.message
    with pytest.raises(openai.APIError, match="overloaded"):
        await ask(server, stream=True)


async def test_no_summary_no_tools(make_proxy: ProxyFactory, fake_upstream: FakeUpstream,
                                   tmp_path: Path) -> None:
    server = await start(make_proxy, fake_upstream, tmp_path)
    short = [{"role": "user", "content": FACT}, {"role": "user", "content": "What was the order?"}]
    for stream in (False, True):
        reply = await client(server).chat.completions.create(
            model="gpt-4o-mini", messages=sdk_messages(short), tools=sdk_tools([CLIENT_TOOL]), stream=stream)
        if stream:
            assert isinstance(reply, openai.AsyncStream)
            [c async for c in reply]
    for request in fake_upstream.requests:
        assert tool_names(request.body) == ["get_weather"]
        assert SEARCH not in json.dumps(request.body) and EXPAND not in json.dumps(request.body)


async def test_recall_switched_off(make_proxy: ProxyFactory, fake_upstream: FakeUpstream,
                                   tmp_path: Path) -> None:
    server = await start(make_proxy, fake_upstream, tmp_path, recall_enabled=False)
    for stream in (False, True):
        _, content, calls, _ = await ask(server, stream)
        assert content == "I cannot look that up." and calls == []
    assert len(fake_upstream.requests) == 2
    for request in fake_upstream.requests:
        body = request.body
        assert any("<ctxproxy:summary" in str(m.get("content")) for m in body["messages"])
        assert tool_names(body) == ["get_weather"]
        assert SEARCH not in json.dumps(body) and EXPAND not in json.dumps(body)
        assert "to see the original messages" not in json.dumps(body)  # the retrieval hint


async def test_rounds_are_bounded(make_proxy: ProxyFactory, fake_upstream: FakeUpstream,
                                  tmp_path: Path) -> None:
    base = settings("", tmp_path)
    fake_upstream.responder = lambda body: (
        Reply(text=None, tool_calls=[tool_call(f"c{len(body['messages'])}", SEARCH, {"pattern": "kayak"})])
        if SEARCH in tool_names(body) else Reply(text="giving up"))
    server = await make_proxy(replace(base, model_list=(replace(
        base.model_list[0], litellm_params=LiteLLMParams("openai/gpt-4o-mini", fake_upstream.url)),),
        recall=RecallSettings(max_rounds=2)))
    reply = await client(server).chat.completions.create(model="gpt-4o-mini",
                                                         messages=sdk_messages(long_history()))
    assert reply.choices[0].message.content == "giving up"
    assert [SEARCH in tool_names(r.body) for r in fake_upstream.requests] == [True, True, False]
