"""Every error a client can see: status and OpenAI-shaped body, upstream errors passed through."""

from __future__ import annotations

import asyncio
import io
import json
import socket
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from aiohttp.test_utils import TestServer
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam

from compaction.engine import EarlyStart
from compaction.resend.early_forward import EarlyForward
from compaction.types import ChatTurn, PreparedRequest
from tests.conftest import TEST_API_KEY, ProxyFactory, proxy_settings_for
from tests.fakes.upstream import ErrorReply, FakeUpstream, Reply
from tests.proxy.passthrough_engine import PassthroughEngine
from tests.sdk_params import sdk_messages

USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]
CHAT = json.dumps({"model": "gpt-4o-mini", "messages": USER}).encode()


def error_body(error: openai.APIError) -> dict[str, Any]:
    """The OpenAI-shaped `error` object the SDK parsed from the reply (the SDK types it `object`)."""
    assert isinstance(error.body, dict)
    return error.body


async def post_raw(server: TestServer, data: bytes) -> tuple[int, dict[str, Any]]:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TEST_API_KEY}"}
    async with aiohttp.ClientSession() as http, http.post(
            server.make_url("/v1/chat/completions"), data=data, headers=headers) as resp:
        return resp.status, await resp.json()


@pytest.mark.parametrize(("data", "param", "fragment"), [
    (b'{"model": "gpt-4o-mini", "messages": [', None, "could not parse the JSON body"),
    (b'["not", "an", "object"]', None, "must be a JSON object"),
    (b'{"messages": []}', "model", "must provide a model"),
    (b'{"model": "gpt-4o-mini", "messages": "hi"}', "messages", "at least one message"),
    (b'{"model": "gpt-4o-mini", "messages": {"role": "user"}}', "messages", "at least one message"),
    (b'{"model": "gpt-4o-mini"}', "messages", "at least one message"),
    (b'{"model": "gpt-4o-mini", "messages": []}', "messages", "at least one message"),
])
async def test_malformed_requests_are_400(proxy_server: TestServer, data: bytes, param: str | None,
                                          fragment: str) -> None:
    status, body = await post_raw(proxy_server, data)
    assert status == 400
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["param"] == param
    assert fragment in body["error"]["message"]


async def test_invalid_messages_name_the_path(openai_client: AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        await openai_client.chat.completions.create(
            model="gpt-4o-mini",
            messages=sdk_messages([{"role": "user", "content": "a"}, {"content": "no role"}]))
    assert err.value.status_code == 400
    assert error_body(err.value)["param"].startswith("messages[1]")


async def test_unknown_model_is_404(openai_client: AsyncOpenAI, fake_upstream: FakeUpstream) -> None:
    with pytest.raises(openai.NotFoundError) as err:
        await openai_client.chat.completions.create(model="nope-model", messages=USER)
    assert error_body(err.value)["code"] == "model_not_found"
    assert fake_upstream.requests == []


async def test_body_over_limit_is_413(make_proxy: ProxyFactory) -> None:
    server = await make_proxy(max_body_bytes=4096)
    big = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x" * 8000}]})
    status, body = await post_raw(server, big.encode())
    assert status == 413 and body["error"]["code"] == "request_too_large"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_upstream_unreachable_is_502(make_proxy: ProxyFactory, tmp_path: Path) -> None:
    settings = proxy_settings_for(f"http://127.0.0.1:{closed_port()}/v1", tmp_path / "s.db")
    server = await make_proxy(settings)
    status, body = await post_raw(server, CHAT)
    assert status == 502 and body["error"]["type"] == "upstream_error"


async def test_upstream_timeout_is_504(make_proxy: ProxyFactory, fake_upstream: FakeUpstream) -> None:
    server = await make_proxy(upstream_timeout_s=0.2)
    fake_upstream.queue(Reply(delay_s=3))
    status, body = await post_raw(server, CHAT)
    assert status == 504 and body["error"]["code"] == "upstream_timeout"


@pytest.mark.parametrize(("status", "error"), [
    (429, {"message": "Rate limit reached", "type": "requests", "param": None,
           "code": "rate_limit_exceeded"}),
    (400, {"message": "Invalid 'temperature'", "type": "invalid_request_error", "param": "temperature",
           "code": "invalid_value"}),
])
async def test_upstream_errors_pass_through_unchanged(proxy_server: TestServer, fake_upstream: FakeUpstream,
                                                      status: int, error: dict[str, Any]) -> None:
    fake_upstream.queue(ErrorReply(status, {"error": error}))
    got_status, body = await post_raw(proxy_server, CHAT)
    assert (got_status, body) == (status, {"error": error})


async def test_upstream_error_without_json_is_502(proxy_server: TestServer,
                                                  fake_upstream: FakeUpstream) -> None:
    fake_upstream.queue(ErrorReply(500, b"<html>oops</html>"))
    status, body = await post_raw(proxy_server, CHAT)
    assert status == 502 and body["error"]["type"] == "upstream_error"


async def test_upstream_error_on_stream_open_passes_through(openai_client: AsyncOpenAI,
                                                            fake_upstream: FakeUpstream) -> None:
    fake_upstream.queue(ErrorReply(429, {"error": {"message": "slow", "type": "requests", "code": "x"}}))
    with pytest.raises(openai.RateLimitError):
        await openai_client.chat.completions.create(model="gpt-4o-mini", messages=USER, stream=True)


@pytest.mark.parametrize("script", [Reply(text="a long reply cut short", chunk_size=2, cut_after=3),
                                    Reply(text="no done marker", omit_done=True)])
async def test_broken_stream_ends_with_sse_error_event(openai_client: AsyncOpenAI,
                                                       fake_upstream: FakeUpstream, script: Reply) -> None:
    fake_upstream.queue(script)
    stream = await openai_client.chat.completions.create(model="gpt-4o-mini", messages=USER, stream=True)
    received = []
    with pytest.raises(openai.APIError) as err:
        async for chunk in stream:
            received.append(chunk)
    assert received, "chunks before the cut reach the client"
    assert error_body(err.value)["type"] == "upstream_error"


async def test_broken_stream_stores_no_reply(make_proxy: ProxyFactory, fake_upstream: FakeUpstream) -> None:
    from tests.proxy.passthrough_engine import PassthroughEngine

    engines: list[PassthroughEngine] = []

    def factory(store: Any, *_: Any) -> PassthroughEngine:
        engines.append(PassthroughEngine(store))
        return engines[-1]

    server = await make_proxy(engine_factory=factory)
    fake_upstream.queue(Reply(text="cut here please", chunk_size=2, cut_after=2))
    async with aiohttp.ClientSession() as http, http.post(server.make_url("/v1/chat/completions"),
                         json={"model": "gpt-4o-mini", "messages": USER, "stream": True}) as resp:
        text = await asyncio.wait_for(resp.text(), 10)
    assert "event: error" in text
    assert engines[0].replies == []


class _BuggyEngine(PassthroughEngine):
    """An engine with a ctxproxy bug on the request path."""

    async def prepare(self, turn: ChatTurn, early: EarlyForward | None = None,
                      start: EarlyStart | None = None) -> PreparedRequest:
        raise KeyError("a bug in ctxproxy")


async def test_a_ctxproxy_bug_is_a_500_with_its_traceback_logged(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream) -> None:
    logs = io.StringIO()
    server = await make_proxy(engine_factory=lambda store, *_: _BuggyEngine(store), log_stream=logs)
    status, body = await post_raw(server, CHAT)
    assert status == 500 and body["error"]["code"] == "internal_error"
    assert "a bug in ctxproxy" not in body["error"]["message"]  # internals stay in the log
    (line,) = [json.loads(x) for x in logs.getvalue().splitlines() if '"unhandled_error"' in x]
    assert "Traceback" in line["exception"] and "KeyError: 'a bug in ctxproxy'" in line["exception"]
    assert fake_upstream.requests == []


async def test_a_bug_inside_the_upstream_call_is_a_500_not_a_502(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = io.StringIO()
    server = await make_proxy(log_stream=logs)

    def broken(*args: Any, **kwargs: Any) -> str:
        raise AttributeError("compact_json broke")

    monkeypatch.setattr("proxy.upstream.openai.compact_json", broken)
    status, body = await post_raw(server, CHAT)
    assert status == 500 and body["error"]["type"] == "server_error"
    assert any('"unhandled_error"' in x and "AttributeError" in x for x in logs.getvalue().splitlines())
