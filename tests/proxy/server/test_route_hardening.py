"""Every route reads and checks its body alike: a body not in its `Content-Encoding` is a 400, the
Responses and Messages routes refuse bad parameter types and ranges as chat does (in each route's
error shape, nothing forwarded), and a streamed reply is stored even when the client leaves at once."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from proxy import appkeys
from proxy.server.warmup import WARMUP
from tests.conftest import TEST_API_KEY, settled
from tests.fakes.upstream import FakeUpstream, Reply

USER = [{"role": "user", "content": "hi"}]
CHAT = {"model": "gpt-4o-mini", "messages": USER}
RESPONSES = {"model": "gpt-4o-mini", "input": "hi"}
MESSAGES = {"model": "gpt-4o-mini", "max_tokens": 5, "messages": USER}
HEADERS = {"Content-Type": "application/json", "Authorization": f"Bearer {TEST_API_KEY}"}
ROUTES: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": CHAT, "/v1/responses": RESPONSES, "/v1/messages": MESSAGES,
    "/v1/messages/count_tokens": {"model": "gpt-4o-mini", "messages": USER},
    "/v1/context/search": {"query": "x"}, "/v1/embeddings": {"model": "gpt-4o-mini", "input": "x"},
}


async def post(server: TestServer, path: str, data: bytes,
               headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.post(
            server.make_url(path), data=data, headers={**HEADERS, **(headers or {})}) as resp:
        return resp.status, await resp.json(content_type=None)


def error_of(path: str, body: dict[str, Any]) -> dict[str, Any]:
    """The error object in the route's shape: Anthropic's on /v1/messages, OpenAI's elsewhere."""
    if path.startswith("/v1/messages"):
        assert body["type"] == "error" and set(body["error"]) == {"type", "message"}, body
        return dict(body["error"])
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    return dict(body["error"])


@pytest.mark.parametrize("path", list(ROUTES))
async def test_a_body_that_is_not_its_content_encoding_is_400_on_every_route(
        proxy_server: TestServer, fake_upstream: FakeUpstream, path: str) -> None:
    data = json.dumps(ROUTES[path]).encode()
    status, body = await post(proxy_server, path, data, {"Content-Encoding": "gzip"})
    assert status == 400, body
    error = error_of(path, body)
    assert error["type"] == "invalid_request_error" and "Content-Encoding" in error["message"]
    assert fake_upstream.requests == []
    status, body = await post(proxy_server, path, gzip.compress(data), {"Content-Encoding": "gzip"})
    assert status != 400 or "Content-Encoding" not in str(body)  # a real gzip body is read as before


@pytest.mark.parametrize(("path", "extra", "param"), [
    ("/v1/responses", {"stream": "yes"}, "stream"),
    ("/v1/responses", {"temperature": 9}, "temperature"),
    ("/v1/responses", {"max_output_tokens": "100"}, "max_output_tokens"),
    ("/v1/responses", {"max_output_tokens": 0}, "max_output_tokens"),
    ("/v1/responses", {"top_p": 2}, "top_p"),
    ("/v1/responses", {"previous_response_id": "resp_1", "stream": "yes"}, "stream"),
    ("/v1/messages", {"stream": "yes"}, "stream"),
    ("/v1/messages", {"max_tokens": "5"}, "max_tokens"),
    ("/v1/messages", {"max_tokens": None}, "max_tokens"),
    ("/v1/messages", {"temperature": 9}, "temperature"),
    ("/v1/messages", {"system": 5}, "system"),
    ("/v1/messages", {"stop_sequences": [1]}, "stop_sequences"),
])
async def test_bad_responses_and_messages_parameters_are_400_in_the_routes_shape(
        proxy_server: TestServer, fake_upstream: FakeUpstream, path: str, extra: dict[str, Any],
        param: str) -> None:
    sent = {k: v for k, v in {**ROUTES[path], **extra}.items() if v is not None}
    status, body = await post(proxy_server, path, json.dumps(sent).encode())
    assert status == 400, body
    error = error_of(path, body)
    assert error["type"] == "invalid_request_error" and param in error["message"]
    if path == "/v1/responses":
        assert error["param"] == param
    assert fake_upstream.requests == []


async def stream_until_done(server: TestServer) -> bytes:
    """A raw client: a streamed chat request, read up to `data: [DONE]`, then the socket closed at
    once (no reading of the chunked terminator)."""
    assert server.port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    body = json.dumps({**CHAT, "stream": True}).encode()
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"
                 b"Authorization: Bearer " + TEST_API_KEY.encode() + b"\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body) + body)
    await writer.drain()
    received = b""
    while b"data: [DONE]" not in received:
        chunk = await asyncio.wait_for(reader.read(65536), 5)
        assert chunk, received
        received += chunk
    writer.transport.abort()
    return received


async def test_a_completed_stream_is_stored_when_the_client_leaves_right_after_done(
        proxy_server: TestServer, fake_upstream: FakeUpstream) -> None:
    await proxy_server.app[WARMUP].done.wait()
    gate = asyncio.Event()
    fake_upstream.queue(Reply(text="stored after all", gate=gate))
    client = asyncio.create_task(stream_until_done(proxy_server))
    await asyncio.wait_for(fake_upstream.first_chunk_sent.wait(), 5)  # prepared: the engine is free
    host, release = proxy_server.app[appkeys.HOST], threading.Event()
    busy = asyncio.gather(*(h.run(lambda: release.wait(5)) for h in host.hosts))  # the reply's write queues
    gate.set()
    assert b"data: [DONE]" in await client
    await asyncio.sleep(0.2)  # the server sees the client gone and cancels the handler
    release.set()
    await busy
    await settled(proxy_server)
    store = proxy_server.app[appkeys.STORE]
    tenant = store.for_tenant(store.tenant_id_for_key(TEST_API_KEY))
    conversations = tenant.list_conversations(limit=5)
    assert len(conversations) == 1
    contents = [m.message for m in tenant.messages(conversations[0].id) if m.role == "assistant"]
    assert any("stored after all" in str(c) for c in contents), contents
