"""A scriptable fake OpenAI upstream (aiohttp test server) speaking JSON and SSE.

Tests queue `Reply` / `ErrorReply` scripts (served in order; an empty queue answers "ok"), or set
`responder` to decide per request (e.g. answer summarization prompts as an LLM summarizer would).
Every request is recorded with its headers and JSON body. Streams can be slowed, gated on an
event, cut mid-way (connection dropped) or left without `[DONE]`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.fakes import responses_api

JSON = dict[str, Any]


@dataclass
class Reply:
    """A successful completion: text and/or tool calls, streamed when the request asks."""

    text: str | None = "ok"
    tool_calls: list[JSON] = field(default_factory=list)  # [{"id", "name", "arguments"}]
    refusal: str | None = None
    delay_s: float = 0.0  # before the response headers
    chunk_delay_s: float = 0.0  # between stream chunks
    chunk_size: int = 4  # characters of text per content chunk
    cut_after: int | None = None  # drop the connection after this many stream events
    omit_done: bool = False  # end the stream cleanly but without `data: [DONE]`
    gate: asyncio.Event | None = None  # stream: wait for it before sending the 2nd event
    finish_reason: str | None = None
    usage: JSON | None = None
    reasoning: bool = False  # Responses API: a reasoning item (encrypted content) first


@dataclass
class ErrorReply:
    """An upstream error answer with a status and a raw body (JSON-encoded when not bytes)."""

    status: int
    body: Any = None
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)  # e.g. Retry-After, x-ratelimit-*


Script = Reply | ErrorReply
Responder = Callable[[JSON], Script | None]


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: JSON
    method: str = "POST"
    raw: bytes = b""  # the exact bytes received (the other /v1/ APIs, forwarded unchanged)


def tool_call(call_id: str, name: str, arguments: Any) -> JSON:
    """Helper: a scripted tool call (arguments JSON-encoded when not already a string)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "name": name, "arguments": args}


class FakeUpstream:
    """The fake provider. Start with `await fake.start()`; base URL (with /v1) in `fake.url`."""

    def __init__(self) -> None:
        self.scripts: list[Script] = []
        self.responder: Responder | None = None
        self.requests: list[RecordedRequest] = []
        self.stream_closed = asyncio.Event()  # set when a client drops a stream mid-way
        self.first_chunk_sent = asyncio.Event()
        self.server: TestServer | None = None
        self.app = web.Application(client_max_size=256 * 1024 * 1024)
        for prefix in ("/v1", ""):
            self.app.router.add_post(f"{prefix}/chat/completions", self._completions)
        self.app.router.add_get("/v1/models", self._models)
        self.app.router.add_post("/v1/responses", self._responses)
        self.models: list[str] = []  # what GET /v1/models lists
        self.app.router.add_route("*", "/v1/{tail:.*}", self._other_api)

    async def start(self) -> FakeUpstream:
        self.server = TestServer(self.app)  # handler_cancellation is on in TestServer
        await self.server.start_server()
        return self

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()

    @property
    def url(self) -> str:
        assert self.server is not None, "start() first"
        return str(self.server.make_url("/v1"))

    def queue(self, *scripts: Script) -> None:
        self.scripts.extend(scripts)

    @property
    def last_body(self) -> JSON:
        return self.requests[-1].body

    def _next_script(self, body: JSON) -> Script:
        if self.responder is not None:
            chosen = self.responder(body)
            if chosen is not None:
                return chosen
        return self.scripts.pop(0) if self.scripts else Reply()

    async def _models(self, request: web.Request) -> web.Response:
        self.requests.append(RecordedRequest(request.path, dict(request.headers), {}, "GET"))
        return web.json_response({"object": "list", "data": [
            {"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.models]})

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        """The Responses API: JSON, or its typed SSE events when the request streams."""
        raw = await request.read()
        body = json.loads(raw)
        self.requests.append(RecordedRequest(request.path, dict(request.headers), body, raw=raw))
        script = self._next_script(body)
        if isinstance(script, ErrorReply):
            return _error_response(script)
        suffix = f"_{len(self.requests)}" if len(self.requests) > 1 else ""
        items = responses_api.output_items(script.text, script.tool_calls, script.reasoning, suffix)
        if not body.get("stream"):
            return web.json_response(responses_api.response_json(body, items))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for i, event in enumerate(responses_api.sse_events(body, items, script.chunk_size)):
            if script.cut_after is not None and i >= script.cut_after:
                assert request.transport is not None
                request.transport.close()
                return response
            await response.write(event)
        await response.write_eof()
        return response

    async def _other_api(self, request: web.Request) -> web.StreamResponse:
        """Embeddings, completions, moderations, models/{id} and an echo for anything else."""
        raw = await request.read()
        body = _json_or_empty(raw)
        self.requests.append(RecordedRequest(request.path, dict(request.headers), body,
                                             request.method, raw))
        head = self.scripts[0] if self.scripts else None
        if isinstance(head, ErrorReply):
            self.scripts.pop(0)
            return _error_response(head)
        answer = other_api_json(request.match_info["tail"], request.method, body, raw)
        return web.json_response(answer, headers={"x-request-id": "req_fake_other",
                                                  "x-ratelimit-remaining-requests": "99"})

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(RecordedRequest(request.path, dict(request.headers), body))
        script = self._next_script(body)
        if script.delay_s:
            await asyncio.sleep(script.delay_s)
        if isinstance(script, ErrorReply):
            return _error_response(script)
        if body.get("stream"):
            return await self._stream(request, body, script)
        return web.json_response(completion_json(body, script))

    async def _stream(self, request: web.Request, body: JSON, script: Reply) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        events = stream_events(body, script)
        try:
            for i, event in enumerate(events):
                if script.cut_after is not None and i >= script.cut_after:
                    assert request.transport is not None
                    request.transport.close()  # abrupt: no terminating chunk, no [DONE]
                    return response
                if i == 1 and script.gate is not None:
                    await script.gate.wait()
                elif i and script.chunk_delay_s:
                    await asyncio.sleep(script.chunk_delay_s)
                await response.write(event)
                if i == 0:
                    self.first_chunk_sent.set()
        except (asyncio.CancelledError, ConnectionResetError):
            self.stream_closed.set()
            raise
        await response.write_eof()
        return response


def _error_response(script: ErrorReply) -> web.Response:
    raw = script.body if isinstance(script.body, bytes) else json.dumps(script.body).encode()
    return web.Response(status=script.status, body=raw, content_type="application/json",
                        headers=script.headers)


def _json_or_empty(raw: bytes) -> JSON:
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def other_api_json(tail: str, method: str, body: JSON, raw: bytes) -> JSON:
    """OpenAI-shaped answers of the APIs ctxproxy forwards without compaction."""
    model = body.get("model", "fake")
    usage = {"prompt_tokens": 3, "total_tokens": 3}
    if tail == "embeddings":
        given = body.get("input")
        inputs: list[Any] = given if isinstance(given, list) else [given]
        return {"object": "list", "model": model, "usage": usage, "data": [
            {"object": "embedding", "index": i, "embedding": [0.5, -0.25, float(i)]}
            for i in range(len(inputs))]}
    if tail == "completions":
        return {"id": "cmpl-fake", "object": "text_completion", "created": 0, "model": model,
                "choices": [{"index": 0, "text": f"<{body.get('prompt')}>", "logprobs": None,
                             "finish_reason": "stop"}],
                "usage": {**usage, "completion_tokens": 1, "total_tokens": 4}}
    if tail == "moderations":
        return {"id": "modr-fake", "model": model, "results": [{
            "flagged": False, "categories": {}, "category_scores": {}, "category_applied_input_types": {}}]}
    if tail.startswith("models/"):
        return {"id": tail.removeprefix("models/"), "object": "model", "created": 0, "owned_by": "fake"}
    return {"echo": tail, "method": method, "received_bytes": len(raw)}


def _usage(body: JSON, text: str) -> JSON:
    prompt = sum(len(json.dumps(m)) // 4 for m in body.get("messages", []))
    return {"prompt_tokens": prompt, "completion_tokens": max(1, len(text) // 4),
            "total_tokens": prompt + max(1, len(text) // 4)}


def completion_json(body: JSON, script: Reply) -> JSON:
    """A non-streaming chat.completion for `script`."""
    message: JSON = {"role": "assistant", "content": script.text, "refusal": script.refusal,
                     "annotations": []}
    if script.tool_calls:
        message["tool_calls"] = [{"id": c["id"], "type": "function",
                                  "function": {"name": c["name"], "arguments": c["arguments"]}}
                                 for c in script.tool_calls]
    finish = script.finish_reason or ("tool_calls" if script.tool_calls else "stop")
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            "usage": script.usage or _usage(body, script.text or "")}


def _chunk(body: JSON, delta: JSON, finish: str | None = None, usage: JSON | None = None) -> bytes:
    data: JSON = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                  "model": body.get("model", "fake"),
                  "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
    if usage is not None:
        data["choices"], data["usage"] = [], usage
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def stream_events(body: JSON, script: Reply) -> list[bytes]:
    """The SSE events of `script`: role, content pieces, tool-call deltas, finish, usage, [DONE]."""
    events = [_chunk(body, {"role": "assistant", "content": ""})]
    text = script.text or ""
    events += [_chunk(body, {"content": text[i:i + script.chunk_size]})
               for i in range(0, len(text), max(1, script.chunk_size))]
    if script.refusal:
        events.append(_chunk(body, {"refusal": script.refusal}))
    for index, call in enumerate(script.tool_calls):
        events.append(_chunk(body, {"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                                    "function": {"name": call["name"], "arguments": ""}}]}))
        args = call["arguments"]
        half = len(args) // 2
        for piece in (args[:half], args[half:]):
            events.append(_chunk(body, {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    finish = script.finish_reason or ("tool_calls" if script.tool_calls else "stop")
    events.append(_chunk(body, {}, finish))
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append(_chunk(body, {}, usage=script.usage or _usage(body, text)))
    if not script.omit_done:
        events.append(b"data: [DONE]\n\n")
    return events
