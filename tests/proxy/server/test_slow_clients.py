"""Slow and idle clients against the served app on an ephemeral port (real sockets, short timeouts):
a head or body that does not arrive in time gets a 408 and a closed connection, connections past the
bound get a 503, parser errors on /v1/messages come back in Anthropic's shape, and the server serves
on throughout."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from proxy.app import create_app
from proxy.server.protocol import start
from tests.conftest import TEST_API_KEY, proxy_settings_for
from tests.fakes.upstream import FakeUpstream

TIMEOUT_S = 0.3
# Margins are wide on purpose: the checks tell the configured 0.3 s timeouts from the defaults (10 s
# head, 30 s body) or from no timeout at all, and a loaded CI machine can stall a test for a second.
WITHIN_S = 5.0
READ_GUARD_S = 8.0  # every answer comes well within this
HEALTH = b"GET /healthz HTTP/1.1\r\nHost: proxy\r\nConnection: close\r\n\r\n"


@dataclass
class Served:
    runner: web.AppRunner
    port: int


async def serve(fake: FakeUpstream, tmp_path: Path, **server: Any) -> Served:
    settings = proxy_settings_for(fake.url, tmp_path / "store.db", header_timeout_s=TIMEOUT_S,
                                  body_timeout_s=TIMEOUT_S, **server)
    runner = await start(create_app(settings), "127.0.0.1", 0)
    port = runner.addresses[0][1]
    return Served(runner, port)


@pytest.fixture
async def served(fake_upstream: FakeUpstream, tmp_path: Path) -> AsyncIterator[Served]:
    s = await serve(fake_upstream, tmp_path, min_body_bytes_per_s=1_000)
    try:
        yield s
    finally:
        await s.runner.cleanup()


async def answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], Any]:
    """Status, headers and JSON body of the one answer on a connection, read to its close."""
    data = await asyncio.wait_for(reader.read(), READ_GUARD_S)
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, json.loads(body) if body else None


async def healthy(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(HEALTH)
    status, _, _ = await answer(reader)
    writer.close()
    assert status == 200


async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pieces: list[bytes],
                  pause_s: float) -> tuple[int, dict[str, str], Any]:
    """Send `pieces` one by one, `pause_s` apart, until the server answers (read meanwhile)."""
    reading = asyncio.create_task(answer(reader))
    for piece in pieces:
        if reading.done():
            break
        writer.write(piece)
        await asyncio.sleep(pause_s)
    return await reading


def head(path: str, length: int) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {TEST_API_KEY}\r\nContent-Length: {length}\r\n\r\n").encode()


async def test_a_connection_that_sends_nothing_gets_408_and_is_closed(served: Served) -> None:
    began = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    status, headers, body = await answer(reader)
    assert status == 408 and headers["connection"] == "close"
    assert body["error"]["code"] == "request_timeout"
    assert TIMEOUT_S <= time.monotonic() - began < WITHIN_S
    writer.close()
    await healthy(served.port)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
async def test_a_head_sent_a_byte_at_a_time_is_cut_off(served: Served, path: str) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    began = time.monotonic()
    line, _, rest = head(path, 2).partition(b"\r\n")
    # A byte every 50 ms: never idle for header_timeout_s, and the whole head would take ~7 s.
    status, _, body = await trickle(reader, writer, [line + b"\r\n", *(bytes([b]) for b in rest)], 0.05)
    assert status == 408 and time.monotonic() - began < WITHIN_S
    if path == "/v1/messages":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    else:
        assert body["error"]["code"] == "request_timeout"
    writer.close()
    await healthy(served.port)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/embeddings"])
async def test_a_body_shorter_than_its_content_length_gets_408(served: Served, path: str,
                                                              fake_upstream: FakeUpstream) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(head(path, 100) + b'{"model": ')
    began = time.monotonic()
    status, headers, body = await answer(reader)
    assert status == 408 and headers["connection"] == "close"
    assert TIMEOUT_S <= time.monotonic() - began < WITHIN_S
    message = body["error"]["message"]
    assert "did not arrive in time" in message
    assert (body.get("type") == "error") == (path == "/v1/messages")
    writer.close()
    assert fake_upstream.requests == []
    await healthy(served.port)


async def test_a_body_trickled_slowly_is_cut_off_by_the_minimum_rate(served: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(head("/v1/chat/completions", 200))
    began = time.monotonic()
    # One byte every 50 ms: never idle for body_timeout_s, far below the minimum rate; the 190
    # bytes would take 9.5 s, the rate bound cuts in after 0.3 s + 200 bytes at 1000 bytes/s.
    status, _, body = await trickle(reader, writer, [b" "] * 190, 0.05)
    assert status == 408 and "did not arrive in time" in body["error"]["message"]
    assert time.monotonic() - began < WITHIN_S
    writer.close()


async def test_connections_past_the_bound_get_503_and_are_closed(fake_upstream: FakeUpstream,
                                                                 tmp_path: Path) -> None:
    s = await serve(fake_upstream, tmp_path, max_connections=3)
    try:
        held = [await asyncio.open_connection("127.0.0.1", s.port) for _ in range(3)]
        reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
        status, headers, body = await answer(reader)
        assert status == 503 and headers["retry-after"] == "1"
        assert body["error"]["code"] == "too_many_connections"
        writer.close()
        for _, w in held:
            w.close()
        await asyncio.sleep(0.05)  # the server sees them closed
        await healthy(s.port)
    finally:
        await s.runner.cleanup()


async def test_parser_errors_on_messages_have_anthropics_shape(served: Served) -> None:
    for path, anthropic in (("/v1/messages", True), ("/v1/chat/completions", False)):
        reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
        writer.write(f"POST {path} HTTP/1.1\r\nHost: proxy\r\nX-Trace: a\x01b\r\n"
                     "Content-Length: 2\r\n\r\n{}".encode())
        status, _, body = await answer(reader)
        assert status == 400
        if anthropic:
            assert body["type"] == "error" and set(body["error"]) == {"type", "message"}
            assert body["error"]["type"] == "invalid_request_error"
            assert body["error"]["message"].startswith("malformed HTTP request")
        else:
            assert body["error"]["code"] == "malformed_request"
        writer.close()
    await healthy(served.port)
