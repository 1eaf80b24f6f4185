"""Chat completions through the official openai SDK: bodies, streams, tool calls, headers, routes."""

from __future__ import annotations

import io
import json

import aiohttp
from openai import AsyncOpenAI
from openai.types.chat import (
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageToolCallUnion,
    ChatCompletionSystemMessageParam,
    ChatCompletionUserMessageParam,
)

from proxy.observability.metrics import METRIC_NAMES
from tests.conftest import TEST_API_KEY, ProxyFactory
from tests.fakes.upstream import FakeUpstream, Reply, tool_call
from tests.sdk_params import sdk_messages

SYSTEM: ChatCompletionSystemMessageParam = {"role": "system", "content": "You are terse."}
USER_X: ChatCompletionUserMessageParam = {"role": "user", "content": "x"}
TOOLS: list[ChatCompletionFunctionToolParam] = [{"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


async def test_non_streaming_reply_arrives_intact(make_proxy: ProxyFactory,
                                                  fake_upstream: FakeUpstream) -> None:
    import openai

    logs = io.StringIO()
    server = await make_proxy(log_stream=logs)
    fake_upstream.queue(Reply(text="Bonjour, Ada."))
    async with openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key=TEST_API_KEY,
                                  max_retries=0) as openai_client:
        raw = await openai_client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini",
            messages=sdk_messages([SYSTEM, {"role": "user", "content": "hi", "pinned": True}]))
    completion = raw.parse()
    assert completion.choices[0].message.content == "Bonjour, Ada."
    assert completion.usage is not None and completion.usage.completion_tokens > 0
    sent = fake_upstream.last_body
    assert sent["model"] == "gpt-4o-mini"
    assert all("pinned" not in m for m in sent["messages"])
    assert fake_upstream.requests[-1].headers["Authorization"] == f"Bearer {TEST_API_KEY}"
    (line,) = [json.loads(entry) for entry in logs.getvalue().splitlines() if '"event": "request"' in entry]
    assert raw.headers["X-Ctxproxy-Compacted"] == "false"  # two short messages: nothing to compact
    assert line["compacted"] is False
    assert raw.headers["X-Ctxproxy-Conversation-Id"] == line["conversation_id"]
    assert int(raw.headers["X-Ctxproxy-Tokens-Forwarded"]) == line["tokens_forwarded"] > 0
    assert float(raw.headers["X-Ctxproxy-Overhead-Ms"]) == line["overhead_ms"]


async def test_configured_key_replaces_client_key(openai_client: AsyncOpenAI,
                                                  fake_upstream: FakeUpstream) -> None:
    await openai_client.chat.completions.create(model="keyed-model", messages=[USER_X])
    assert fake_upstream.requests[-1].headers["Authorization"] == "Bearer sk-upstream-configured-0123456789"
    assert fake_upstream.last_body["model"] == "gpt-4o"


async def test_wildcard_model_and_extra_params_pass_through(openai_client: AsyncOpenAI,
                                                             fake_upstream: FakeUpstream) -> None:
    await openai_client.chat.completions.create(
        model="fake-mini", messages=[{"role": "user", "content": "x"}], temperature=0.3, seed=7,
        extra_body={"custom_param": {"a": 1}})
    body = fake_upstream.last_body
    assert body["model"] == "fake-mini"
    assert (body["temperature"], body["seed"], body["custom_param"]) == (0.3, 7, {"a": 1})


async def test_streaming_reply_arrives_intact(openai_client: AsyncOpenAI,
                                              fake_upstream: FakeUpstream) -> None:
    fake_upstream.queue(Reply(text="The quick brown fox jumps.", chunk_size=3))
    stream = await openai_client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}], stream=True,
        stream_options={"include_usage": True})
    pieces, usage = [], None
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        usage = chunk.usage or usage
    assert "".join(pieces) == "The quick brown fox jumps."
    assert usage is not None and usage.completion_tokens > 0
    assert fake_upstream.last_body["stream"] is True


def function_calls(calls: list[ChatCompletionMessageToolCallUnion] | None,
                   ) -> list[ChatCompletionMessageFunctionToolCall]:
    """A reply's tool calls, every one a function call (anything else fails the test)."""
    assert calls is not None
    functions = [c for c in calls if isinstance(c, ChatCompletionMessageFunctionToolCall)]
    assert len(functions) == len(calls)
    return functions


async def test_tool_calls_non_streaming_and_parallel(openai_client: AsyncOpenAI,
                                                     fake_upstream: FakeUpstream) -> None:
    calls = [tool_call("call_a", "get_weather", {"city": "Porto"}),
             tool_call("call_b", "get_weather", {"city": "Faro"})]
    fake_upstream.queue(Reply(text=None, tool_calls=calls))
    completion = await openai_client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "weather?"}], tools=TOOLS)
    got = function_calls(completion.choices[0].message.tool_calls)
    assert [(c.id, c.function.name, json.loads(c.function.arguments)["city"]) for c in got] == [
        ("call_a", "get_weather", "Porto"), ("call_b", "get_weather", "Faro")]
    assert completion.choices[0].finish_reason == "tool_calls"
    assert fake_upstream.last_body["tools"] == TOOLS


async def test_tool_calls_streaming_parallel(openai_client: AsyncOpenAI, fake_upstream: FakeUpstream) -> None:
    calls = [tool_call("call_a", "get_weather", {"city": "Porto"}),
             tool_call("call_b", "get_weather", {"city": "Faro"})]
    fake_upstream.queue(Reply(text=None, tool_calls=calls))
    stream = await openai_client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "weather?"}], tools=TOOLS, stream=True)
    args: dict[int, str] = {}
    ids: dict[int, str] = {}
    async for chunk in stream:
        for delta in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
            assert delta.function is not None
            args[delta.index] = args.get(delta.index, "") + (delta.function.arguments or "")
            ids[delta.index] = delta.id or ids.get(delta.index, "")
    assert ids == {0: "call_a", 1: "call_b"}
    assert [json.loads(args[i])["city"] for i in (0, 1)] == ["Porto", "Faro"]


async def test_models_health_ready_metrics(openai_client: AsyncOpenAI, proxy_url: str) -> None:
    models = await openai_client.models.list()
    assert [m.id for m in models.data] == ["gpt-4o-mini", "keyed-model"]
    await openai_client.chat.completions.create(model="gpt-4o-mini", messages=[USER_X])
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy_url + "/v1/models") as resp:
            assert "fake-*" in (await resp.json())["ctxproxy_note"]
        async with http.get(proxy_url + "/healthz") as resp:
            assert resp.status == 200
        async with http.get(proxy_url + "/readyz") as resp:
            assert resp.status == 200 and (await resp.json())["status"] == "ready"
        async with http.get(proxy_url + "/metrics") as resp:
            text = await resp.text()
    for name in METRIC_NAMES:
        assert f"# TYPE {name.removesuffix('_total')}" in text, name
    assert 'ctxproxy_requests_total{route="/v1/chat/completions",status="200"} 1.0' in text
    assert "conversation" not in text and "tenant" not in text


async def test_canonical_request_log_line_without_key(make_proxy: ProxyFactory,
                                                      fake_upstream: FakeUpstream) -> None:
    logs = io.StringIO()
    server = await make_proxy(log_stream=logs)
    fake_upstream.queue(Reply(text="ok", usage={"prompt_tokens": 5, "completion_tokens": 2,
                                                "total_tokens": 7}))
    async with aiohttp.ClientSession() as http, http.post(server.make_url("/v1/chat/completions"),
                         headers={"Authorization": f"Bearer {TEST_API_KEY}"},
                         json={"model": "gpt-4o-mini",
                               "messages": [{"role": "user", "content": f"my key is {TEST_API_KEY}"}]}
                         ) as resp:
        assert resp.status == 200
    lines = [json.loads(line) for line in logs.getvalue().splitlines()]
    (line,) = [entry for entry in lines if entry["event"] == "request"]
    for key in ("method", "path", "status", "model", "conversation_id", "tokens_received",
                "tokens_forwarded", "tokens_out", "compacted", "upstream_status", "latency_ms",
                "overhead_ms", "stream"):
        assert key in line
    got = (line["status"], line["upstream_status"], line["tokens_out"], line["stream"])
    assert got == (200, 200, 2, False)
    assert TEST_API_KEY not in logs.getvalue()
