"""Streaming is pass-through: chunk 1 reaches the client before chunk 2 exists; disconnects cancel."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp.test_utils import TestServer

from tests.conftest import TEST_API_KEY
from tests.fakes.upstream import FakeUpstream, Reply

BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "stream"}], "stream": True}
GUARD_S = 10  # only a hang guard: a buffering proxy deadlocks here instead of passing


async def read_event(resp: aiohttp.ClientResponse) -> bytes:
    lines: list[bytes] = []
    while True:
        line = await resp.content.readline()
        if not line.strip():
            return b"".join(lines)
        lines.append(line)


async def test_first_chunk_delivered_before_second_is_produced(proxy_server: TestServer,
                                                               fake_upstream: FakeUpstream) -> None:
    gate = asyncio.Event()  # the fake upstream sends chunk 2 only after the client has chunk 1
    fake_upstream.queue(Reply(text="hello world", gate=gate))
    headers = {"Authorization": f"Bearer {TEST_API_KEY}"}
    async with aiohttp.ClientSession() as http, http.post(
            proxy_server.make_url("/v1/chat/completions"), json=BODY, headers=headers) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        first = await asyncio.wait_for(read_event(resp), GUARD_S)
        assert b'"role": "assistant"' in first and not gate.is_set()
        gate.set()
        rest = await asyncio.wait_for(resp.read(), GUARD_S)
    assert b"hell" in rest and rest.rstrip().endswith(b"data: [DONE]")


async def test_client_disconnect_cancels_upstream(proxy_server: TestServer,
                                                  fake_upstream: FakeUpstream) -> None:
    never = asyncio.Event()  # the upstream would wait forever before chunk 2
    fake_upstream.queue(Reply(text="a b c d", gate=never))
    async with aiohttp.ClientSession() as http:
        resp = await http.post(proxy_server.make_url("/v1/chat/completions"), json=BODY)
        await asyncio.wait_for(read_event(resp), GUARD_S)
        resp.close()  # drop the connection mid-stream
    await asyncio.wait_for(fake_upstream.stream_closed.wait(), GUARD_S)
    assert fake_upstream.stream_closed.is_set()
