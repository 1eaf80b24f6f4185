"""The SSE relay against byte-exact upstream streams (tests/proxy/upstream/raw_upstream.py), over HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import TEST_API_KEY, ProxyFactory, proxy_settings_for
from tests.proxy.upstream.raw_upstream import RawUpstream, chunk_json

BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "raw"}], "stream": True}
HEADERS = {"Authorization": f"Bearer {TEST_API_KEY}"}
GUARD_S = 10  # hang guard only: a buffering proxy deadlocks here instead of passing

RawProxy = Callable[..., Awaitable[tuple[RawUpstream, Any]]]


@pytest.fixture
async def raw_proxy(make_proxy: ProxyFactory, tmp_path: Path) -> AsyncIterator[RawProxy]:
    """`await raw_proxy(chunks, gate_at=None)` -> (raw upstream, proxy server routed to it)."""
    started: list[RawUpstream] = []

    async def factory(chunks: list[bytes], gate_at: int | None = None, engine_factory: Any = None,
                      headers: dict[str, str] | None = None,
                      eof_delay_s: float = 0.0) -> tuple[RawUpstream, Any]:
        raw = await RawUpstream(chunks, gate_at, headers, eof_delay_s).start()
        started.append(raw)
        settings = proxy_settings_for(raw.url, tmp_path / "store.db")
        return raw, await make_proxy(settings, engine_factory=engine_factory)

    yield factory
    for raw in started:
        await raw.close()


def sse(obj: Any, ending: bytes = b"\n", event: str | None = None) -> bytes:
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    head = f"event: {event}{ending.decode()}".encode() if event else b""
    return head + b"data: " + data + ending + ending


async def read_event(resp: aiohttp.ClientResponse) -> bytes:
    lines: list[bytes] = []
    while True:
        line = await resp.content.readline()
        if not line.strip():
            return b"".join(lines)
        lines.append(line)


async def test_bare_cr_stream_is_relayed_event_by_event(raw_proxy: RawProxy) -> None:
    chunks = [sse(chunk_json({"role": "assistant", "content": "Hel"}), b"\r"),
              sse(chunk_json({"content": "lo"}), b"\r"), sse(chunk_json({}, "stop"), b"\r"),
              sse(b"[DONE]", b"\r")]
    raw, proxy = await raw_proxy(chunks, gate_at=1)
    async with aiohttp.ClientSession() as http, http.post(
            proxy.make_url("/v1/chat/completions"), json=BODY, headers=HEADERS) as resp:
        first = await asyncio.wait_for(read_event(resp), GUARD_S)
        assert b'"Hel"' in first and not raw.gate.is_set()
        raw.gate.set()
        rest = await asyncio.wait_for(resp.read(), GUARD_S)
    assert b'"lo"' in rest and rest.rstrip().endswith(b"data: [DONE]") and b"event: error" not in rest


async def test_keepalive_comments_and_multiline_data_pass_through(raw_proxy: RawProxy) -> None:
    payload = json.dumps(chunk_json({"role": "assistant", "content": "ok"}), indent=1).encode()
    multi = b"".join(b"data: " + line + b"\n" for line in payload.split(b"\n")) + b"\n"
    chunks = [b": keepalive\n\n", multi, sse(chunk_json({}, "stop")), b": keepalive\n\n", sse(b"[DONE]")]
    _raw, proxy = await raw_proxy(chunks)
    import openai

    async with openai.AsyncOpenAI(base_url=str(proxy.make_url("/v1")), api_key=TEST_API_KEY,
                                  max_retries=0) as client:
        stream = await client.chat.completions.create(model="gpt-4o-mini", stream=True,
                                                      messages=[{"role": "user", "content": "raw"}])
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "ok"


COMPLETE = [sse(chunk_json({"role": "assistant", "content": "ok"})), sse(chunk_json({}, "stop")),
            sse(b"[DONE]")]


async def test_finished_streams_reuse_one_upstream_connection(raw_proxy: RawProxy) -> None:
    # The body's end arrives after [DONE] has been relayed, as from a real provider.
    raw, proxy = await raw_proxy(COMPLETE, eof_delay_s=0.05)
    async with aiohttp.ClientSession() as http:
        for _ in range(3):
            async with http.post(proxy.make_url("/v1/chat/completions"), json=BODY,
                                 headers=HEADERS) as resp:
                assert (await resp.read()).rstrip().endswith(b"data: [DONE]")
    assert raw.requests == 3 and len(set(raw.peers)) == 1


async def test_account_headers_of_the_upstream_are_never_relayed(raw_proxy: RawProxy) -> None:
    upstream_headers = {"OpenAI-Organization": "org-operator", "OpenAI-Project": "proj_operator",
                        "OpenAI-Processing-Ms": "12", "X-Request-Id": "req_1"}
    _raw, proxy = await raw_proxy(COMPLETE, headers=upstream_headers)
    async with aiohttp.ClientSession() as http, http.post(
            proxy.make_url("/v1/chat/completions"), json=BODY, headers=HEADERS) as resp:
        await resp.read()
    assert "OpenAI-Organization" not in resp.headers and "OpenAI-Project" not in resp.headers
    assert (resp.headers["OpenAI-Processing-Ms"], resp.headers["X-Request-Id"]) == ("12", "req_1")
