"""A byte-exact SSE upstream for wire-level tests: serves scripted raw chunks, optionally gated.

tests/fakes/upstream.py always writes well-formed `\\n\\n` events; this one writes whatever a test
scripts (bare `\\r` line endings, non-JSON error events, odd deltas), so the proxy's parser and relay
can be checked against them through HTTP.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer


class RawUpstream:
    """POST /v1/chat/completions answers with `chunks`; before chunk `gate_at` it waits on `gate`."""

    def __init__(self, chunks: list[bytes], gate_at: int | None = None,
                 headers: dict[str, str] | None = None, eof_delay_s: float = 0.0) -> None:
        self.chunks = chunks
        self.gate_at = gate_at
        self.gate = asyncio.Event()
        self.headers = headers or {}
        self.eof_delay_s = eof_delay_s  # pause between the last chunk and the end of the body
        self.requests = 0
        self.peers: list[Any] = []  # the client address of each request (one per connection)
        self.app = web.Application()
        self.app.router.add_post("/v1/chat/completions", self._serve)
        self.server: TestServer | None = None

    async def start(self) -> RawUpstream:
        self.server = TestServer(self.app)
        await self.server.start_server()
        return self

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return str(self.server.make_url("/v1"))

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        self.requests += 1
        assert request.transport is not None
        self.peers.append(request.transport.get_extra_info("peername"))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **self.headers})
        await response.prepare(request)
        for i, chunk in enumerate(self.chunks):
            if i == self.gate_at:
                await self.gate.wait()
            await response.write(chunk)
        if self.eof_delay_s:
            await asyncio.sleep(self.eof_delay_s)
        await response.write_eof()
        return response


def chunk_json(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-raw", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
