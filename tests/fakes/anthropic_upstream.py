"""A scriptable fake Anthropic upstream (aiohttp test server) speaking Messages JSON and SSE.

Tests queue `MessageReply` / `ErrorReply` scripts (an empty queue answers "ok"), or set `responder`
to decide per request (e.g. a model that calls the recall tools, then answers from their results).
Every request is recorded with its headers and JSON body. Streams follow the real event order and can be cut.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.fakes.upstream import ErrorReply, RecordedRequest

JSON = dict[str, Any]
SIGNATURE = "EqQBCkYIARgCIkD-signature-bytes"


@dataclass
class MessageReply:
    """A scripted Messages reply: optional thinking (signed), text, tool_use blocks."""

    text: str | None = "ok"
    tool_uses: list[JSON] = field(default_factory=list)  # [{"id", "name", "input"}]
    thinking: str | None = None
    cache_read: int = 0
    cut_after: int | None = None  # drop the connection after this many stream events


def content_blocks(script: MessageReply) -> list[JSON]:
    blocks: list[JSON] = []
    if script.thinking:
        blocks.append({"type": "thinking", "thinking": script.thinking, "signature": SIGNATURE})
    if script.text:
        blocks.append({"type": "text", "text": script.text})
    blocks += [{"type": "tool_use", **call} for call in script.tool_uses]
    return blocks


def message_json(body: JSON, script: MessageReply) -> JSON:
    stop = "tool_use" if script.tool_uses else "end_turn"
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": content_blocks(script),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": len(json.dumps(body)) // 4,
            "output_tokens": 7,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": script.cache_read,
        },
    }


def _event(data: JSON) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def stream_events(body: JSON, script: MessageReply) -> list[bytes]:
    full = message_json(body, script)
    events = [
        _event(
            {
                "type": "message_start",
                "message": {
                    **full,
                    "content": [],
                    "stop_reason": None,
                    "usage": {**full["usage"], "output_tokens": 1},
                },
            }
        ),
        _event({"type": "ping"}),
    ]
    for index, block in enumerate(full["content"]):
        events += _block_events(index, block)
    events += [
        _event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": full["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": 7},
            }
        ),
        _event({"type": "message_stop"}),
    ]
    return events


def _block_events(index: int, block: JSON) -> list[bytes]:
    kind = block["type"]
    if kind == "thinking":
        opened: JSON = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": block["thinking"]},
            {"type": "signature_delta", "signature": block["signature"]},
        ]
    elif kind == "text":
        opened = {"type": "text", "text": ""}
        text = block["text"]
        deltas = [{"type": "text_delta", "text": text[i : i + 5]} for i in range(0, len(text), 5)]
    else:
        opened = {**block, "input": {}}
        raw = json.dumps(block["input"])
        deltas = [
            {"type": "input_json_delta", "partial_json": raw[:3]},
            {"type": "input_json_delta", "partial_json": raw[3:]},
        ]
    return [
        _event({"type": "content_block_start", "index": index, "content_block": opened}),
        *[_event({"type": "content_block_delta", "index": index, "delta": d}) for d in deltas],
        _event({"type": "content_block_stop", "index": index}),
    ]


class FakeAnthropic:
    """The fake Anthropic API; `url` is the base without /v1, as LiteLLM spells api_base."""

    def __init__(self) -> None:
        self.scripts: list[MessageReply | ErrorReply] = []
        self.responder: Callable[[JSON], MessageReply | ErrorReply | None] | None = None
        self.requests: list[RecordedRequest] = []
        self.server: TestServer | None = None
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self.app.router.add_post("/v1/messages", self._messages)
        self.app.router.add_post("/v1/messages/count_tokens", self._count)

    async def start(self) -> FakeAnthropic:
        self.server = TestServer(self.app)
        await self.server.start_server()
        return self

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()

    @property
    def url(self) -> str:
        assert self.server is not None, "start() first"
        return str(self.server.make_url("")).rstrip("/")

    @property
    def last_body(self) -> JSON:
        return self.requests[-1].body

    def queue(self, *scripts: MessageReply | ErrorReply) -> None:
        self.scripts.extend(scripts)

    async def _count(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(RecordedRequest(request.path, dict(request.headers), body))
        return web.json_response({"input_tokens": 4242})

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw)
        self.requests.append(RecordedRequest(request.path, dict(request.headers), body, raw=raw))
        script = self.responder(body) if self.responder is not None else None
        if script is None:
            script = self.scripts.pop(0) if self.scripts else MessageReply()
        if isinstance(script, ErrorReply):
            return web.json_response(script.body, status=script.status, headers=script.headers)
        if not body.get("stream"):
            return web.json_response(message_json(body, script), headers={"request-id": "req_fake_anth"})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for i, event in enumerate(stream_events(body, script)):
            if script.cut_after is not None and i >= script.cut_after:
                assert request.transport is not None
                request.transport.close()
                return response
            await response.write(event)
        await response.write_eof()
        return response
