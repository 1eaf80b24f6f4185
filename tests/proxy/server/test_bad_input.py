"""Malformed requests: every one a 400 in OpenAI's error shape, nothing forwarded."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import openai
import pytest
from aiohttp.test_utils import TestServer
from openai import AsyncOpenAI

from tests.conftest import TEST_API_KEY
from tests.fakes.upstream import FakeUpstream
from tests.sdk_params import sdk_messages

USER: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
ROUND: list[dict[str, Any]] = [{"role": "user", "content": "run it"},
         {"role": "assistant", "content": None,
          "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "sh", "arguments": "{}"}}]},
         {"role": "tool", "tool_call_id": "c1", "content": "ok"}]


def chat(**extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": USER, **extra}


async def post(server: TestServer, path: str, data: bytes,
               headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    sent = {"Content-Type": "application/json", "Authorization": f"Bearer {TEST_API_KEY}",
            **(headers or {})}
    async with aiohttp.ClientSession() as http, http.post(server.make_url(path), data=data,
                                                         headers=sent) as resp:
        return resp.status, await resp.json()


def assert_openai_400(status: int, body: dict[str, Any], param: str | None) -> None:
    assert status == 400, body
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["param"] == param


def nested(depth: int) -> bytes:
    return b'{"model": "gpt-4o-mini", "messages": ' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.parametrize(("data", "param"), [
    (b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"a\\ud800b"}]}',
     "messages[0].content"),
    (b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"text","text":"\\udfff"}]}]}',
     "messages[0].content[0].text"),
    (json.dumps({"model": "gpt-4o-mini", "messages": [
        ROUND[0], {**ROUND[1], "tool_calls": [{"id": "c1", "type": "function",
                                                "function": {"name": "x\ud800", "arguments": "{}"}}]},
        ROUND[2]]}).encode(), "messages[1].tool_calls[0].function.name"),
    (nested(100_000), None),
    (nested(200), None),
    (json.dumps(chat(stream="yes")).encode(), "stream"),
    (json.dumps(chat(max_tokens="ten")).encode(), "max_tokens"),
    (json.dumps(chat(max_tokens=0)).encode(), "max_tokens"),
    (json.dumps(chat(max_completion_tokens=1.5)).encode(), "max_completion_tokens"),
    (json.dumps(chat(temperature="hot")).encode(), "temperature"),
    (json.dumps(chat(temperature=7)).encode(), "temperature"),
    (json.dumps(chat(n=True)).encode(), "n"),
    (json.dumps(chat(stop=[1, 2])).encode(), "stop"),
])
async def test_bad_chat_bodies_are_400_and_never_forwarded(
        proxy_server: TestServer, fake_upstream: FakeUpstream, data: bytes, param: str | None) -> None:
    status, body = await post(proxy_server, "/v1/chat/completions", data)
    assert_openai_400(status, body, param)
    assert fake_upstream.requests == []


@pytest.mark.parametrize("path", ["/v1/context/search", "/v1/context/expand"])
@pytest.mark.parametrize("depth", [200, 100_000])
async def test_deeply_nested_recall_bodies_are_400(proxy_server: TestServer, path: str,
                                                   depth: int) -> None:
    data = b'{"query": ' + b"[" * depth + b"]" * depth + b"}"
    status, body = await post(proxy_server, path, data)
    assert_openai_400(status, body, None)
    assert "nested more than" in body["error"]["message"]


async def test_nesting_within_the_limit_is_accepted(proxy_server: TestServer,
                                                    fake_upstream: FakeUpstream) -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(30):
        schema = {"type": "object", "properties": {"x": schema}}
    tools = [{"type": "function", "function": {"name": "deep", "parameters": schema}}]
    status, _ = await post(proxy_server, "/v1/chat/completions", json.dumps(chat(tools=tools)).encode())
    assert status == 200
    assert fake_upstream.last_body["tools"][0]["function"]["parameters"] == schema


async def test_a_valid_surrogate_pair_is_accepted(proxy_server: TestServer,
                                                  fake_upstream: FakeUpstream) -> None:
    data = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"smile \\ud83d\\ude00"}]}'
    status, _ = await post(proxy_server, "/v1/chat/completions", data)
    assert status == 200
    assert fake_upstream.last_body["messages"][-1]["content"] == "smile \U0001f600"


async def raw_request(server: TestServer, head: bytes, body: bytes) -> bytes:
    """Send bytes aiohttp's client would refuse to write (a non-UTF-8 header value)."""
    assert server.port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(head + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    await writer.drain()
    reply = await reader.read()
    writer.close()
    await writer.wait_closed()
    return reply


@pytest.mark.parametrize("value", [b"ab\xffcd", b"ab\xc3", b"x" * 300, b"a\tb"])
async def test_bad_conversation_header_is_400(proxy_server: TestServer, fake_upstream: FakeUpstream,
                                              value: bytes) -> None:
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/json\r\n"
            b"Authorization: Bearer " + TEST_API_KEY.encode() + b"\r\nX-Conversation-Id: " + value + b"\r\n")
    reply = await raw_request(proxy_server, head, json.dumps(chat()).encode())
    status_line, _, rest = reply.partition(b"\r\n")
    assert status_line.split()[1] == b"400", reply[:300]
    body = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert body["error"]["param"] == "X-Conversation-Id"
    assert fake_upstream.requests == []


async def test_orphan_tool_message_is_refused(openai_client: AsyncOpenAI,
                                              fake_upstream: FakeUpstream) -> None:
    orphan = [*USER, {"role": "tool", "tool_call_id": "zz", "content": "r"}]
    with pytest.raises(openai.BadRequestError) as err:
        await openai_client.chat.completions.create(model="gpt-4o-mini", messages=sdk_messages(orphan))
    assert isinstance(err.value.body, dict) and err.value.body["param"] == "messages[1].tool_call_id"
    wrong_id = [*ROUND[:2], {**ROUND[2], "tool_call_id": "c2"}]
    with pytest.raises(openai.BadRequestError):
        await openai_client.chat.completions.create(model="gpt-4o-mini", messages=sdk_messages(wrong_id))
    assert fake_upstream.requests == []


async def test_answered_tool_round_and_null_params_pass(openai_client: AsyncOpenAI,
                                                        fake_upstream: FakeUpstream) -> None:
    reply = await openai_client.chat.completions.create(
        model="gpt-4o-mini", messages=sdk_messages(ROUND), temperature=0.5, max_tokens=5, stop=["x"])
    assert reply.choices[0].message.role == "assistant"
    assert fake_upstream.last_body["max_tokens"] == 5
