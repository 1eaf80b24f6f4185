"""The model recalls a compacted fact on POST /v1/responses, streamed and not, through the openai SDK.

Real app and engine (local/extractive summarizer, a 4096-token window), the fake upstream's
Responses API playing a model that reasons, searches, expands and answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp.test_utils import TestServer
from openai.types.responses import ResponseInputParam

from proxy import appkeys
from tests.conftest import TEST_API_KEY, ProxyFactory, settled
from tests.fakes.upstream import ErrorReply, FakeUpstream, Reply, tool_call
from tests.proxy.recall.recall_data import FACT
from tests.proxy.recall.test_end_to_end import long_history, settings

JSON = dict[str, Any]
SEARCH, EXPAND = "context_search", "context_expand"
TOOL: JSON = {"type": "function", "name": "get_weather", "description": "Weather for a city.",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


def recalling_model(body: JSON) -> Reply:
    """With a summary in view and the tools offered it reasons and searches, expands, answers."""
    last = body["input"][-1]
    if last.get("type") == "function_call_output":
        result = json.loads(last["output"])
        if "hits" in result:
            hit = next(h for h in result["hits"] if h["kind"] == "message")
            return Reply(text=None, tool_calls=[tool_call("call_expand", EXPAND, {"ids": [hit["id"]]})])
        return Reply(text="From the history: " + result["items"][0]["text"])
    names = {t.get("name") for t in body.get("tools") or []}
    if "<ctxproxy:summary" in json.dumps(body) and SEARCH in names:
        return Reply(text="Let me look.", reasoning=True,
                     tool_calls=[tool_call("call_search", SEARCH, {"pattern": "Halvorsen"})])
    return Reply(text="I cannot look that up.")


@pytest.fixture
async def server(make_proxy: ProxyFactory, fake_upstream: FakeUpstream, tmp_path: Path) -> TestServer:
    fake_upstream.responder = recalling_model
    return await make_proxy(settings(fake_upstream.url, tmp_path))


def request() -> dict[str, Any]:
    history = long_history()
    items: ResponseInputParam = json.loads(json.dumps(history[1:]))
    return {"model": "gpt-4o-mini", "instructions": history[0]["content"], "input": items, "tools": [TOOL]}


def client(server: TestServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key=TEST_API_KEY, max_retries=0)


async def stored(server: TestServer) -> tuple[list[Any], list[Any]]:
    """(the newest conversation's stored messages, its audited recall rounds)."""
    await settled(server)
    store = server.app[appkeys.STORE]
    tenant = store.for_tenant(store.tenant_id_for_key(TEST_API_KEY))
    cid = tenant.list_conversations(limit=1)[0].id
    return tenant.messages(cid), tenant.tool_rounds(cid)


def assert_upstream_rounds(fake: FakeUpstream, stream: bool) -> None:
    """Three rounds, ours offered flat next to the client's tool, the results as function_call_output
    items carrying the recalled text."""
    bodies = [r.body for r in fake.requests]
    assert len(bodies) == 3 and all(bool(b.get("stream")) is stream for b in bodies)
    assert [[t["name"] for t in b["tools"]] for b in bodies] == [["get_weather", SEARCH, EXPAND]] * 3
    calls = [i for i in bodies[1]["input"] if i.get("call_id") == "call_search"]
    assert [i["type"] for i in calls] == ["function_call", "function_call_output"]
    assert bodies[1]["input"][-1]["output"].startswith('{"hits"')
    result = bodies[2]["input"][-1]
    assert result["type"] == "function_call_output" and FACT in result["output"]


async def test_streamed_responses_recall(server: TestServer, fake_upstream: FakeUpstream) -> None:
    sdk = client(server)
    events = [e async for e in await sdk.responses.create(**request(), stream=True)]
    kinds = [e.type for e in events]
    assert kinds.count("response.created") == 1 and kinds[0] == "response.created"
    assert kinds.count("response.completed") == 1 and kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [e.output_index for e in added] == [0, 1, 2]  # reasoning, "Let me look.", the answer
    assert all(getattr(e.item, "name", None) not in (SEARCH, EXPAND) for e in added)
    final = events[-1].response
    assert [i.type for i in final.output] == ["reasoning", "message", "message"]
    created = events[0].response
    assert [getattr(t, "name", None) for t in final.tools] == ["get_weather"]
    assert [getattr(t, "name", None) for t in created.tools] == ["get_weather"]
    assert FACT in final.output_text and final.output_text.startswith("Let me look.")
    sent = sum(len(json.dumps(r.body["input"])) // 4 for r in fake_upstream.requests)
    assert final.usage is not None and final.usage.input_tokens == sent  # summed over the rounds
    assert_upstream_rounds(fake_upstream, stream=True)
    messages, rounds = await stored(server)
    assert len(messages) == len(long_history()) + 1 and FACT in json.dumps(messages[-1].message)
    assert not any(SEARCH in json.dumps(m.message) for m in messages)
    assert [r["calls"][0]["function"]["name"] for r in rounds] == [SEARCH, EXPAND]


async def test_the_stream_helper_and_the_json_reply_agree(server: TestServer,
                                                          fake_upstream: FakeUpstream) -> None:
    sdk = client(server)
    async with sdk.responses.stream(**request()) as events:
        streamed = await events.get_final_response()
    assert FACT in streamed.output_text
    assert all(getattr(i, "name", None) not in (SEARCH, EXPAND) for i in streamed.output)
    fake_upstream.requests.clear()
    final = await sdk.responses.create(**request())
    assert [i.type for i in final.output] == ["message"] and FACT in final.output_text
    assert [getattr(t, "name", None) for t in final.tools] == ["get_weather"]
    assert_upstream_rounds(fake_upstream, stream=False)


async def test_a_client_call_in_the_same_round_ends_the_loop(server: TestServer,
                                                             fake_upstream: FakeUpstream) -> None:
    fake_upstream.responder = lambda body: Reply(text=None, tool_calls=[
        tool_call("call_s", SEARCH, {"pattern": "Halvorsen"}),
        tool_call("call_w", "get_weather", {"city": "Oslo"})])
    events = [e async for e in await client(server).responses.create(**request(), stream=True)]
    final = events[-1].response
    assert [(i.type, getattr(i, "name", None)) for i in final.output] == [("function_call", "get_weather")]
    assert [e.output_index for e in events if e.type == "response.output_item.added"] == [0]
    assert len(fake_upstream.requests) == 1


async def test_an_upstream_error_in_a_later_round_ends_the_stream(server: TestServer,
                                                                  fake_upstream: FakeUpstream) -> None:
    failing = {"error": {"message": "overloaded", "type": "server_error", "param": None, "code": "busy"}}
    fake_upstream.responder = lambda body: ErrorReply(503, failing) \
        if body["input"][-1].get("type") == "function_call_output" else recalling_model(body)
    events = [e async for e in await client(server).responses.create(**request(), stream=True)]
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "error" and "response.completed" not in kinds
    assert "overloaded" in events[-1].message
    assert [e.sequence_number for e in events] == list(range(len(events)))
    messages, _ = await stored(server)
    assert messages[-1].role == "user"  # nothing stored
