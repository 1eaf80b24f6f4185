"""POST /v1/responses through the openai SDK: compaction of input items, streams, chained requests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp.test_utils import TestServer
from openai.types.responses import FunctionToolParam, Response, ResponseInputParam

from compaction.tokens import TokenCounter
from config.settings import (
    CompactionSettings,
    LiteLLMParams,
    ModelEntry,
    Settings,
    StoreSettings,
    SummarizerSettings,
)
from proxy.wire.responses import ITEMS_KEY, to_messages
from tests.conftest import TEST_API_KEY, ProxyFactory
from tests.fakes.upstream import FakeUpstream, Reply, tool_call

JSON = dict[str, Any]
WINDOW = 4096
BUDGET = WINDOW - WINDOW // 4 - CompactionSettings().safety_margin_tokens
SHELL_TOOL: FunctionToolParam = {
    "type": "function",
    "name": "shell",
    "description": "Run a command.",
    "strict": False,
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}


def _items(raw: list[JSON]) -> ResponseInputParam:
    """Plain dicts as the SDK's input type (the SDK sends them as given)."""
    items: ResponseInputParam = json.loads(json.dumps(raw))
    return items


@pytest.fixture
async def small_window_proxy(
    make_proxy: ProxyFactory, fake_upstream: FakeUpstream, tmp_path: Path
) -> TestServer:
    compaction = CompactionSettings(background=False)
    entry = ModelEntry(
        "gpt-4o-mini", LiteLLMParams("openai/gpt-4o-mini", fake_upstream.url), WINDOW, compaction
    )
    settings = Settings(
        model_list=(entry,),
        compaction=compaction,
        store=StoreSettings(str(tmp_path / "s.db")),
        summarizer=SummarizerSettings(model="local/extractive"),
    )
    return await make_proxy(settings)


@pytest.fixture
async def small_client(small_window_proxy: TestServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        base_url=str(small_window_proxy.make_url("/v1")), api_key=TEST_API_KEY, max_retries=0
    ) as client:
        yield client


def agent_history(rounds: int) -> list[JSON]:
    """A user task, then `rounds` tool rounds (reasoning, a call, a long output), then a question."""
    items: list[JSON] = [{"role": "user", "content": "Fix the failing test in repo ORD-4471."}]
    for i in range(rounds):
        items += [
            {"type": "reasoning", "id": f"rs_{i}", "summary": [], "encrypted_content": f"blob-{i}"},
            {
                "type": "function_call",
                "call_id": f"call_{i}",
                "name": "shell",
                "arguments": json.dumps({"cmd": f"cat src/module_{i}.py"}),
            },
            {
                "type": "function_call_output",
                "call_id": f"call_{i}",
                "output": "\n".join(
                    f"def helper_{i}_{j}(x):  # step {j} of module {i}\n    return x + {j}" for j in range(12)
                ),
            },
        ]
    items.append({"role": "user", "content": "Which repo was it?"})
    return items


def assert_pairs_intact(items: list[JSON]) -> None:
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    assert calls == outputs and calls, (calls, outputs)


def forwarded_tokens(body: Any) -> int:
    messages = to_messages(body["input"], body.get("instructions"))
    counter = TokenCounter.for_model("gpt-4o-mini")
    clean = [{k: v for k, v in m.items() if k != ITEMS_KEY} for m in messages]
    return counter.count_messages(clean) + counter.count_tools(body.get("tools"))


async def test_non_streaming_reply_and_items_forwarded_verbatim(
    openai_client: openai.AsyncOpenAI, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.queue(Reply(text="Done: two files.", reasoning=True))
    given: list[JSON] = [
        {"role": "user", "content": "list files"},
        {"type": "reasoning", "id": "rs_0", "summary": [], "encrypted_content": "opaque"},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.py b.py"},
    ]
    raw = await openai_client.responses.with_raw_response.create(
        model="gpt-4o-mini",
        input=_items(given),
        instructions="You are Codex.",
        tools=[SHELL_TOOL],
        store=False,
        include=["reasoning.encrypted_content"],
    )
    response = raw.parse()
    assert response.output_text == "Done: two files."
    sent = fake_upstream.last_body
    assert (sent["input"], sent["instructions"], sent["tools"]) == (given, "You are Codex.", [SHELL_TOOL])
    assert (sent["store"], sent["include"]) == (False, ["reasoning.encrypted_content"])
    assert fake_upstream.requests[-1].path == "/v1/responses"
    assert raw.headers["X-Ctxproxy-Compacted"] == "false" and raw.headers["X-Ctxproxy-Conversation-Id"]


async def test_the_next_turn_continues_the_same_conversation(
    openai_client: openai.AsyncOpenAI, fake_upstream: FakeUpstream
) -> None:
    call = tool_call("c9", "shell", {"cmd": "ls"})
    fake_upstream.queue(Reply(text=None, reasoning=True, tool_calls=[call]))
    first = await openai_client.responses.with_raw_response.create(model="gpt-4o-mini", input="go")
    output = [item.model_dump(exclude_none=True) for item in first.parse().output]
    follow = [
        {"role": "user", "content": "go"},
        *output,
        {"type": "function_call_output", "call_id": "c9", "output": "x.py"},
    ]
    second = await openai_client.responses.with_raw_response.create(model="gpt-4o-mini", input=_items(follow))
    conversation = first.headers["X-Ctxproxy-Conversation-Id"]
    assert second.headers["X-Ctxproxy-Conversation-Id"] == conversation
    assert fake_upstream.last_body["input"][1:3] == output  # reasoning and call sent back unchanged


async def test_streaming_relays_typed_events(
    openai_client: openai.AsyncOpenAI, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.queue(Reply(text="streamed words here", chunk_size=5))
    stream = await openai_client.responses.create(model="gpt-4o-mini", input="hi", stream=True)
    kinds, text = [], ""
    async for event in stream:
        kinds.append(event.type)
        if event.type == "response.output_text.delta":
            text += event.delta
    assert text == "streamed words here"
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert fake_upstream.last_body["stream"] is True


async def test_the_stream_helper_accumulates_the_final_response(
    openai_client: openai.AsyncOpenAI, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.queue(Reply(text="helper text", tool_calls=[tool_call("c1", "shell", {"cmd": "pwd"})]))
    async with openai_client.responses.stream(model="gpt-4o-mini", input="hi") as stream:
        final = await stream.get_final_response()
    assert final.output_text == "helper text"
    assert [item.type for item in final.output] == ["message", "function_call"]


async def test_a_broken_stream_ends_with_an_error_event(
    openai_client: openai.AsyncOpenAI, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.queue(Reply(text="never finished", cut_after=3))
    stream = await openai_client.responses.create(model="gpt-4o-mini", input="hi", stream=True)
    kinds = [event.type async for event in stream]
    assert kinds[-1] == "error" and "response.completed" not in kinds


async def test_chained_requests_are_forwarded_untouched(proxy_url: str, fake_upstream: FakeUpstream) -> None:
    import aiohttp

    raw = (
        b'{"model":"gpt-4o-mini","previous_response_id":"resp_1",  '
        b'"input":[{"role":"user","content":"more"}]}'
    )
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TEST_API_KEY}"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(proxy_url + "/v1/responses", data=raw, headers=headers) as resp,
    ):
        assert resp.status == 200 and "X-Ctxproxy-Conversation-Id" not in resp.headers
    assert fake_upstream.requests[-1].body == json.loads(raw)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_long_agent_conversation_is_compacted_within_budget(
    small_client: openai.AsyncOpenAI, fake_upstream: FakeUpstream, stream: bool
) -> None:
    history = agent_history(30)
    fake_upstream.queue(Reply(text="It was ORD-4471."))
    final: Response
    if stream:
        async with small_client.responses.stream(
            model="gpt-4o-mini", input=_items(history), tools=[SHELL_TOOL]
        ) as events:
            final = await events.get_final_response()
    else:
        final = await small_client.responses.create(
            model="gpt-4o-mini", input=_items(history), tools=[SHELL_TOOL]
        )
    assert final.output_text == "It was ORD-4471."
    sent = fake_upstream.last_body
    assert forwarded_tokens({"input": history, "tools": [SHELL_TOOL]}) > WINDOW  # it had to compact
    assert forwarded_tokens(sent) <= BUDGET
    assert_pairs_intact(sent["input"])
    assert sent["input"][-1] == history[-1]
    kept = [i for i in sent["input"] if i.get("type") == "reasoning"]
    assert kept and all(i in history for i in kept)  # reasoning items kept whole where kept
    assert any("ORD-4471" in json.dumps(i) for i in sent["input"][:-1])  # the fact survived compaction


async def test_the_proxy_answers_the_models_recall_calls(
    small_client: openai.AsyncOpenAI, fake_upstream: FakeUpstream
) -> None:
    def model(body: JSON) -> Reply:
        names = [t.get("name") for t in body.get("tools") or []]
        answered = any(
            i.get("type") == "function_call_output" and i.get("call_id") == "call_recall"
            for i in body["input"]
        )
        if "context_search" in names and not answered:
            return Reply(
                text=None, tool_calls=[tool_call("call_recall", "context_search", {"pattern": "module_3"})]
            )
        return Reply(text="found it")

    fake_upstream.responder = model
    final = await small_client.responses.create(
        model="gpt-4o-mini", input=_items(agent_history(30)), tools=[SHELL_TOOL]
    )
    assert final.output_text == "found it"
    assert all(getattr(item, "name", None) != "context_search" for item in final.output)
    first, second = fake_upstream.requests[-2:]
    assert {t["name"] for t in first.body["tools"]} == {"shell", "context_search", "context_expand"}
    results = [i for i in second.body["input"] if i.get("call_id") == "call_recall"]
    assert [i["type"] for i in results] == ["function_call", "function_call_output"]
    assert "module_3" in results[1]["output"]
    assert_pairs_intact(second.body["input"])
