"""The scripted provider the agent CLIs reach through ctxproxy: Messages, Responses and chat SSE on loopback.

Each request the loop sends (`is_main`) gets the next scripted action, a tool call in the CLI's own tool
vocabulary or the final answer; other requests (titles, quota probes, summaries) get a short text. Every
request is validated as the real provider would and recorded; a path it does not serve is recorded too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.agents import validate
from tests.fakes import anthropic_upstream, responses_api
from tests.fakes import upstream as chat_api

JSON = dict[str, Any]
SIDE_TEXT = "Scratch file chores"


@dataclass(frozen=True)
class Call:
    """A scripted tool call: the CLI's tool name and its arguments."""

    name: str
    arguments: JSON


@dataclass(frozen=True)
class Final:
    """The scripted final answer that ends the loop."""

    text: str


Action = Call | Final
Script = Callable[[int, JSON], Action]


@dataclass
class Received:
    """One request as the provider saw it."""

    path: str
    protocol: str
    body: JSON
    at: float
    main: bool
    violations: list[str]
    tools: set[str]


@dataclass
class AgentProvider:
    """The fake provider: `script(step, body)` answers the loop's requests, `is_main(body)` picks them."""

    script: Script
    is_main: Callable[[JSON], bool]
    received: list[Received] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    reasoning: dict[str, str] = field(default_factory=dict)  # Responses: call_id -> its reasoning item's id
    steps: int = 0
    server: TestServer | None = None

    async def start(self) -> AgentProvider:
        """Serve on a loopback port."""
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/responses", self._responses)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_route("*", "/{tail:.*}", self._unexpected)
        self.server = TestServer(app, host="127.0.0.1")
        await self.server.start_server()
        return self

    async def close(self) -> None:
        """Stop serving."""
        if self.server is not None:
            await self.server.close()

    @property
    def base(self) -> str:
        """The root URL, without /v1."""
        assert self.server is not None, "start() first"
        return str(self.server.make_url("")).rstrip("/")

    @property
    def main_requests(self) -> list[Received]:
        """The loop's requests, in arrival order."""
        return [r for r in self.received if r.main]

    def _record(self, request: web.Request, protocol: str, body: JSON, problems: list[str]) -> Action | None:
        """Record the request; the next scripted action for a loop request, None for a side request."""
        main = self.is_main(body)
        self.received.append(Received(request.path, protocol, body, time.time(), main, problems,
                                      validate.tool_names(body.get("tools"))))
        if not main:
            return None
        action = self.script(self.steps, body)
        self.steps += 1
        return action

    async def _unexpected(self, request: web.Request) -> web.Response:
        """Any other path: recorded, answered 404."""
        self.unexpected.append(f"{request.method} {request.path_qs}")
        return web.json_response({"error": {"message": f"not served: {request.path}"}}, status=404)

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        """Anthropic Messages: JSON or SSE, with a unique message id (Claude Code merges equal ids)."""
        body = await request.json()
        action = self._record(request, "anthropic", body, validate.anthropic_violations(body))
        script = anthropic_upstream.MessageReply(text=SIDE_TEXT)
        if isinstance(action, Call):
            script = anthropic_upstream.MessageReply(text=None, tool_uses=[
                {"id": f"toolu_{self.steps:04d}", "name": action.name, "input": action.arguments}])
        elif isinstance(action, Final):
            script = anthropic_upstream.MessageReply(text=action.text)
        message_id = f"msg_{len(self.received):04d}".encode()
        if not body.get("stream"):
            reply = anthropic_upstream.message_json(body, script)
            return web.json_response({**reply, "id": message_id.decode()})
        events = anthropic_upstream.stream_events(body, script)
        return await _sse(request, [e.replace(b'"msg_fake"', b'"' + message_id + b'"') for e in events])

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        """OpenAI Responses: JSON or typed SSE events, with unique item ids."""
        body = await request.json()
        problems = validate.responses_violations(body) + validate.reasoning_violations(body, self.reasoning)
        action = self._record(request, "responses", body, problems)
        text, calls = _text_and_calls(action, f"call_{self.steps:04d}")
        unique = f"_{len(self.received):04d}"
        items = responses_api.output_items(text, calls, action is not None)
        self.reasoning.update({c["id"]: "rs" + unique for c in calls})
        if not body.get("stream"):
            reply = json.dumps(responses_api.response_json(body, items)).replace('_fake"', unique + '"')
            return web.json_response(text=reply)
        events = responses_api.sse_events(body, items, 40)
        return await _sse(request, [e.replace(b'_fake"', unique.encode() + b'"') for e in events])

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        """Chat completions: JSON or SSE chunks."""
        body = await request.json()
        action = self._record(request, "chat", body, validate.chat_violations(body))
        text, calls = _text_and_calls(action, f"call_{self.steps:04d}")
        reply = chat_api.Reply(text=text, tool_calls=calls, chunk_size=40)
        if not body.get("stream"):
            return web.json_response(chat_api.completion_json(body, reply))
        return await _sse(request, chat_api.stream_events(body, reply))


def _text_and_calls(action: Action | None, call_id: str) -> tuple[str | None, list[JSON]]:
    """The reply's text and OpenAI-shaped tool calls for an action (a side request gets SIDE_TEXT)."""
    if isinstance(action, Call):
        return None, [{"id": call_id, "name": action.name, "arguments": json.dumps(action.arguments)}]
    return (action.text if isinstance(action, Final) else SIDE_TEXT), []


async def _sse(request: web.Request, events: list[bytes]) -> web.StreamResponse:
    """Write SSE events and end the stream."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    for event in events:
        await response.write(event)
    await response.write_eof()
    return response
