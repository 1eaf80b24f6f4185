"""Failures after a stream's headers are sent: the client still gets a well-formed SSE body.

Covers the store failing while the reply is recorded, malformed deltas the reply assembly cannot
use, in-band `event: error` with non-JSON data, and a client disconnect (a CancelledError under
handler_cancellation) closing the upstream and logging `client_disconnected`.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from compaction.types import ChatTurn, Message, PreparedRequest
from config.errors import StoreError
from tests.conftest import TEST_API_KEY, ProxyFactory, proxy_settings_for
from tests.fakes.upstream import FakeUpstream, Reply
from tests.proxy.passthrough_engine import PassthroughEngine
from tests.proxy.upstream.raw_upstream import RawUpstream, chunk_json

BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "go"}], "stream": True}
HEADERS = {"Authorization": f"Bearer {TEST_API_KEY}"}
GUARD_S = 10  # hang guard only


class StoreFailingEngine(PassthroughEngine):
    """Storing the reply fails as a locked/corrupt store would."""

    def record_reply(self, prepared: PreparedRequest, turn: ChatTurn, message: Message) -> None:
        raise StoreError("database is locked")


class RecordingEngine(PassthroughEngine):
    """Keeps the replies it was asked to store, without storing them."""

    def record_reply(self, prepared: PreparedRequest, turn: ChatTurn, message: Message) -> None:
        self.replies.append(message)


def log_lines(logs: io.StringIO, event: str) -> list[dict[str, Any]]:
    return [e for e in (json.loads(line) for line in logs.getvalue().splitlines()) if e["event"] == event]


def sse(obj: Any, event: str | None = None) -> bytes:
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return (f"event: {event}\n".encode() if event else b"") + b"data: " + data + b"\n\n"


async def post_stream(server: TestServer) -> bytes:
    async with aiohttp.ClientSession() as http, http.post(
            server.make_url("/v1/chat/completions"), json=BODY, headers=HEADERS) as resp:
        assert resp.status == 200
        return await asyncio.wait_for(resp.read(), GUARD_S)  # a second response would break chunking


async def test_store_failure_after_the_stream_started_keeps_the_stream_intact(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream) -> None:
    logs = io.StringIO()
    server = await make_proxy(engine_factory=lambda store, *_: StoreFailingEngine(store), log_stream=logs)
    fake_upstream.queue(Reply(text="hello there"))
    body = await post_stream(server)
    assert body.rstrip().endswith(b"data: [DONE]") and b"HTTP/1.1" not in body
    assert log_lines(logs, "reply_store_failed")
    (request,) = log_lines(logs, "request")
    assert request["status"] == 200 and request["error_code"] == "reply_store_failed"


@pytest.mark.parametrize(("tool_call", "stored"), [
    ({"index": None, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}, True),
    ({"index": "first", "id": "call_1", "type": "function", "function": {"name": "f"}}, False),
    ({"index": 0, "id": "call_1", "type": "function", "function": ["not", "an", "object"]}, False),
])
async def test_malformed_deltas_never_break_the_stream(make_proxy: ProxyFactory, tmp_path: Path,
                                                       tool_call: dict[str, Any], stored: bool) -> None:
    chunks = [sse(chunk_json({"role": "assistant", "content": None, "tool_calls": [tool_call]})),
              sse(chunk_json({}, "tool_calls")), sse(b"[DONE]")]
    raw = await RawUpstream(chunks).start()
    try:
        engines: list[RecordingEngine] = []

        def factory(store: Any, *_: Any) -> RecordingEngine:
            engines.append(RecordingEngine(store))
            return engines[-1]

        server = await make_proxy(proxy_settings_for(raw.url, tmp_path / "store.db"), engine_factory=factory)
        body = await post_stream(server)
    finally:
        await raw.close()
    assert body.rstrip().endswith(b"data: [DONE]") and b"HTTP/1.1" not in body
    replies = engines[0].replies
    if stored:
        assert replies[0]["tool_calls"][0]["id"] == "call_1"
    else:
        assert replies == []


async def test_non_json_error_event_is_not_stored_as_a_complete_reply(make_proxy: ProxyFactory,
                                                                      tmp_path: Path) -> None:
    chunks = [sse(chunk_json({"role": "assistant", "content": "partial"})),
              sse(b"upstream overloaded", event="error"), sse(b"[DONE]")]
    raw = await RawUpstream(chunks).start()
    engines: list[RecordingEngine] = []

    def factory(store: Any, *_: Any) -> RecordingEngine:
        engines.append(RecordingEngine(store))
        return engines[-1]

    logs = io.StringIO()
    try:
        server = await make_proxy(proxy_settings_for(raw.url, tmp_path / "store.db"),
                                  engine_factory=factory, log_stream=logs)
        body = await post_stream(server)
    finally:
        await raw.close()
    assert b"upstream overloaded" in body
    assert engines[0].replies == []
    assert log_lines(logs, "stream_broken")


async def test_client_disconnect_is_logged_and_closes_the_upstream(make_proxy: ProxyFactory,
                                                                   fake_upstream: FakeUpstream) -> None:
    logs = io.StringIO()
    server = await make_proxy(log_stream=logs)
    fake_upstream.queue(Reply(text="a b c d", gate=asyncio.Event()))  # chunk 2 never comes
    async with aiohttp.ClientSession() as http:
        resp = await http.post(server.make_url("/v1/chat/completions"), json=BODY, headers=HEADERS)
        await asyncio.wait_for(resp.content.readline(), GUARD_S)
        resp.close()
    await asyncio.wait_for(fake_upstream.stream_closed.wait(), GUARD_S)

    async def request_line() -> dict[str, Any]:
        while not log_lines(logs, "request"):
            await asyncio.sleep(0.01)
        return log_lines(logs, "request")[0]

    line = await asyncio.wait_for(request_line(), GUARD_S)
    assert (line["status"], line["error_code"]) == (499, "client_disconnected")


def test_recall_loop_treats_a_non_json_error_event_as_an_error() -> None:
    from config.errors import UpstreamHTTPError
    from proxy.recall.transport import _chunk

    with pytest.raises(UpstreamHTTPError) as caught:
        _chunk(b"event: error\ndata: upstream overloaded")
    assert caught.value.upstream_status == 502 and "overloaded" in caught.value.message


async def test_a_client_gone_before_its_reply_is_sent_is_recorded_as_499() -> None:
    """The observe middleware sends a reply itself (before its log line); a client gone by then is
    no error, as with aiohttp's own sending: the request is recorded as closed by the client."""
    from aiohttp import web
    from aiohttp.test_utils import make_mocked_request

    from proxy import appkeys
    from proxy.observability.logging import RequestRecord
    from proxy.server.middleware import CLIENT_CLOSED, send_unsent

    class GoneWriter:
        """A connection the client has closed: every write fails."""

        buffer_size = output_size = length = 0

        async def write_headers(self, status_line: str, headers: Any) -> None:
            raise ConnectionResetError("client gone")

        send_headers = write = write_eof = drain = write_headers

    request = make_mocked_request("POST", "/v1/chat/completions", writer=GoneWriter())
    request[appkeys.RECORD] = RequestRecord(method="POST", path="/v1/chat/completions")
    await send_unsent(request, web.json_response({"ok": True}))
    assert request[appkeys.RECORD].status == CLIENT_CLOSED
