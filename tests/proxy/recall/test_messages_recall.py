"""The model recalls a compacted fact on POST /v1/messages, streamed and not, through the anthropic SDK.

Real app and engine (local/extractive summarizer, a 4096-token window), the fake Anthropic API
playing a model that searches, expands and answers (signed thinking on its first round); and an
entry that does not speak Messages, answered through the chat transports and translated back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from aiohttp.test_utils import TestServer
from anthropic.types import MessageParam, ToolParam

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
from tests.fakes.anthropic_upstream import SIGNATURE, FakeAnthropic, MessageReply
from tests.fakes.upstream import ErrorReply, FakeUpstream
from tests.proxy.recall.recall_data import FACT
from tests.proxy.recall.test_end_to_end import long_history, recalling_model

JSON = dict[str, Any]
SEARCH, EXPAND = "context_search", "context_expand"
RAW_EVENTS = frozenset({"message_start", "content_block_start", "content_block_delta", "content_block_stop",
                        "message_delta", "message_stop"})
TOOL: ToolParam = {"name": "get_weather", "description": "Weather for a city.",
                   "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


def _results(body: JSON) -> list[JSON]:
    content = body["messages"][-1]["content"]
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] \
        if isinstance(content, list) else []


def recalling_claude(body: JSON) -> MessageReply:
    """With a summary in view and the tools offered it searches (thinking first), expands, answers."""
    results = _results(body)
    if results:
        result = json.loads(results[0]["content"])
        if "hits" in result:
            hit = next(h for h in result["hits"] if h["kind"] == "message")
            return MessageReply(text=None, tool_uses=[
                {"id": "toolu_expand", "name": EXPAND, "input": {"ids": [hit["id"]]}}])
        return MessageReply(text="From the history: " + result["items"][0]["text"])
    offered = {t["name"] for t in body.get("tools") or []}
    if "<ctxproxy:summary" in json.dumps(body) and SEARCH in offered:
        return MessageReply(text="Let me look.", thinking="search the history", tool_uses=[
            {"id": "toolu_search", "name": SEARCH, "input": {"pattern": "Halvorsen"}}])
    return MessageReply(text="I cannot look that up.")


@pytest.fixture
async def fake_anthropic() -> AsyncIterator[FakeAnthropic]:
    fake = await FakeAnthropic().start()
    fake.responder = recalling_claude
    try:
        yield fake
    finally:
        await fake.close()


@pytest.fixture
async def server(make_proxy: ProxyFactory, fake_anthropic: FakeAnthropic, fake_upstream: FakeUpstream,
                 tmp_path: Path) -> TestServer:
    compaction = CompactionSettings(background=False)
    models = (ModelEntry("claude-small", LiteLLMParams("anthropic/claude-haiku", fake_anthropic.url),
                         4096, compaction),
              ModelEntry("gpt-small", LiteLLMParams("openai/gpt-4o-mini", fake_upstream.url), 4096,
                         compaction))
    return await make_proxy(Settings(model_list=models, compaction=compaction,
                                     store=StoreSettings(str(tmp_path / "s.db")),
                                     summarizer=SummarizerSettings(model="local/extractive"),
                                     recall=RecallSettings()))


@pytest.fixture
async def client(server: TestServer) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(base_url=str(server.make_url("")).rstrip("/"), api_key=TEST_API_KEY,
                                        max_retries=0) as c:
        yield c


def request(model: str = "claude-small") -> dict[str, Any]:
    history = long_history()
    messages: list[MessageParam] = json.loads(json.dumps(history[1:]))
    return {"model": model, "max_tokens": 256, "system": history[0]["content"], "messages": messages,
            "tools": [TOOL]}


async def stored(server: TestServer, cid: str) -> tuple[list[Any], list[Any]]:
    """(the conversation's stored messages, its audited recall rounds)."""
    await settled(server)
    store = server.app[appkeys.STORE]
    tenant = store.for_tenant(store.tenant_id_for_key(TEST_API_KEY))
    return tenant.messages(cid), tenant.tool_rounds(cid)


def assert_upstream_rounds(fake: FakeAnthropic, stream: bool) -> None:
    """Three rounds: ours offered as Anthropic tools next to the client's, each reply turn sent back
    as the model wrote it (signed thinking included), the results as tool_result blocks."""
    bodies = [r.body for r in fake.requests]
    assert len(bodies) == 3 and all(b["stream"] is stream for b in bodies)
    assert [[t["name"] for t in b["tools"]] for b in bodies] == [["get_weather", SEARCH, EXPAND]] * 3
    assert bodies[0]["tools"][1]["input_schema"]["required"] == ["pattern"]
    replied = bodies[1]["messages"][-2]
    assert replied["role"] == "assistant" and replied["content"][0] == {
        "type": "thinking", "thinking": "search the history", "signature": SIGNATURE}
    assert replied["content"][-1]["name"] == SEARCH
    assert bodies[1]["messages"][:-2] == bodies[0]["messages"]  # the rounds only append
    result = bodies[2]["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_expand"
    assert FACT in result["content"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_native_messages_recall(client: anthropic.AsyncAnthropic, server: TestServer,
                                      fake_anthropic: FakeAnthropic, stream: bool) -> None:
    if stream:
        async with client.messages.stream(**request()) as sse:
            events = [e async for e in sse if e.type in RAW_EVENTS]
            final = await sse.get_final_message()
        assert_stream_is_one_message(events)
    else:
        final = await client.messages.create(**request())
    assert final.stop_reason == "end_turn"
    assert [b.type for b in final.content] == ["thinking", "text", "text"]  # every round's, ours left out
    assert FACT in final.content[-1].text  # type: ignore[union-attr]
    assert final.usage.output_tokens == 21  # 7 per round, summed
    assert_upstream_rounds(fake_anthropic, stream)
    messages, rounds = await stored(server, await _cid(server))
    assert len(messages) == len(long_history()) + 1
    assert messages[-1].message["ctxproxy_blocks"][0]["signature"] == SIGNATURE
    assert not any(SEARCH in json.dumps(m.message) or EXPAND in json.dumps(m.message) for m in messages)
    assert FACT in json.dumps(messages[-1].message)
    assert [r["calls"][0]["function"]["name"] for r in rounds][:2] == [SEARCH, EXPAND]


async def _cid(server: TestServer) -> str:
    await settled(server)
    store = server.app[appkeys.STORE]
    tenant = store.for_tenant(store.tenant_id_for_key(TEST_API_KEY))
    return tenant.list_conversations(limit=1)[0].id


def assert_stream_is_one_message(events: list[Any]) -> None:
    """message_start once, block indices 0..n-1 in order, one message_delta and message_stop, no
    recall tool_use, usage summed in the final delta."""
    kinds = [e.type for e in events]
    assert kinds.count("message_start") == 1 and kinds[0] == "message_start"
    assert kinds.count("message_delta") == kinds.count("message_stop") == 1 and kinds[-1] == "message_stop"
    starts = [e.index for e in events if e.type == "content_block_start"]
    assert starts == list(range(len(starts))) == [0, 1, 2]
    assert all(e.content_block.type != "tool_use" for e in events if e.type == "content_block_start")
    delta = next(e for e in events if e.type == "message_delta")
    assert delta.usage.output_tokens == 21 and delta.delta.stop_reason == "end_turn"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_translated_messages_recall(client: anthropic.AsyncAnthropic, server: TestServer,
                                          fake_upstream: FakeUpstream, stream: bool) -> None:
    fake_upstream.responder = recalling_model
    if stream:
        async with client.messages.stream(**request("gpt-small")) as events:
            final = await events.get_final_message()
    else:
        final = await client.messages.create(**request("gpt-small"))
    assert [b.type for b in final.content] == ["text"] and FACT in final.content[0].text  # type: ignore[union-attr]
    assert final.stop_reason == "end_turn" and len(fake_upstream.requests) == 3
    assert FACT in fake_upstream.requests[2].body["messages"][-1]["content"]
    _, rounds = await stored(server, await _cid(server))
    assert [r["calls"][0]["function"]["name"] for r in rounds] == [SEARCH, EXPAND]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_client_tool_in_the_same_round_ends_the_loop(client: anthropic.AsyncAnthropic,
                                                             fake_anthropic: FakeAnthropic,
                                                             stream: bool) -> None:
    fake_anthropic.responder = lambda body: MessageReply(text="Checking.", tool_uses=[
        {"id": "toolu_s", "name": SEARCH, "input": {"pattern": "Halvorsen"}},
        {"id": "toolu_w", "name": "get_weather", "input": {"city": "Oslo"}}])
    if stream:
        async with client.messages.stream(**request()) as sse:
            events = [e async for e in sse if e.type in RAW_EVENTS]
            final = await sse.get_final_message()
        assert [e.index for e in events if e.type == "content_block_start"] == [0, 1]
    else:
        final = await client.messages.create(**request())
    assert [b.type for b in final.content] == ["text", "tool_use"] and final.stop_reason == "tool_use"
    assert final.content[1].name == "get_weather"  # type: ignore[union-attr]
    assert final.content[1].input == {"city": "Oslo"}  # type: ignore[union-attr]
    assert len(fake_anthropic.requests) == 1  # the client's call ends the turn, as on chat


async def test_an_upstream_error_in_a_later_round_ends_the_stream(client: anthropic.AsyncAnthropic,
                                                                  server: TestServer,
                                                                  fake_anthropic: FakeAnthropic) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    fake_anthropic.responder = lambda body: ErrorReply(529, overloaded) if _results(body) \
        else recalling_claude(body)
    with pytest.raises(anthropic.APIStatusError, match="Overloaded"):
        await client.messages.create(**request())
    with pytest.raises(anthropic.APIStatusError):
        async with client.messages.stream(**request()) as sse:
            [e async for e in sse]
    messages, _ = await stored(server, await _cid(server))
    assert messages[-1].role == "user"  # no reply stored for either


async def test_rounds_are_bounded_and_the_last_one_offers_only_the_clients_tools(
        make_proxy: ProxyFactory, fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    compaction = CompactionSettings(background=False)
    entry = ModelEntry("claude-small", LiteLLMParams("anthropic/claude-haiku", fake_anthropic.url), 4096,
                       compaction)
    server = await make_proxy(Settings(model_list=(entry,), compaction=compaction,
                                       store=StoreSettings(str(tmp_path / "bounded.db")),
                                       summarizer=SummarizerSettings(model="local/extractive"),
                                       recall=RecallSettings(max_rounds=1)))
    fake_anthropic.responder = lambda body: MessageReply(text="giving up") if SEARCH not in json.dumps(
        body.get("tools")) else MessageReply(text=None, tool_uses=[
            {"id": f"toolu_{len(body['messages'])}", "name": SEARCH, "input": {"pattern": "kayak"}}])
    async with anthropic.AsyncAnthropic(base_url=str(server.make_url("")).rstrip("/"), api_key=TEST_API_KEY,
                                        max_retries=0) as sdk, sdk.messages.stream(**request()) as sse:
        final = await sse.get_final_message()
    assert [b.type for b in final.content] == ["text"] and final.content[0].text == "giving up"  # type: ignore[union-attr]
    assert [[t["name"] for t in r.body["tools"]] for r in fake_anthropic.requests] == [
        ["get_weather", SEARCH, EXPAND], ["get_weather"]]
    assert fake_anthropic.requests[1].body["messages"][-1]["content"][0]["type"] == "tool_result"
