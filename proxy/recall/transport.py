"""Plugging the recall tool loop into the chat handler: one wrapper around the upstream transport.

`for_turn(...)` returns the handler's own `Upstream` unchanged when the recall tools are not offered
this turn, else a `RecallUpstream` speaking the same protocol (`complete` / `open_stream`) that runs
proxy/recall/tool_loop.py underneath. So the handler's relay, reply assembly, error events and reply
storage work unchanged: they only ever see what the client sees.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from compaction import Message, PreparedRequest, ResultBudget, TokenCounter, recall, redact_obj
from config.errors import UpstreamError, UpstreamHTTPError
from config.settings import LiteLLMParams, RecallSettings
from proxy import appkeys
from proxy.engine_host import InlineRunner, StoreRunner
from proxy.recall.tool_loop import JSON, ResultLimit, RoundTransport, ToolLoop
from proxy.upstream.openai import StreamingReply, Upstream, UpstreamReply
from proxy.wire.openai import compact_json
from proxy.wire.sse import DONE, classify
from store.interface import TenantAccess


@dataclass(frozen=True)
class StoreRecallTools:
    """The recall tools of one conversation: compaction.recall's schemas and executor, the store's audit."""

    store: TenantAccess
    conversation_id: str
    settings: RecallSettings
    on_call: Callable[[str], None] | None = None  # metrics: "search" | "expand" per executed call
    runner: StoreRunner = InlineRunner()  # where the store's calls run (the engine thread in a server)

    def schemas(self) -> list[JSON]:
        return list(recall.tool_schemas(self.settings))

    def is_recall(self, name: str) -> bool:
        return recall.is_recall_tool(name, self.settings)

    async def execute(self, name: str, arguments: str) -> str:
        if self.on_call is not None:
            self.on_call("search" if name == self.settings.search_tool_name else "expand")
        return await self.runner.run(lambda: recall.execute(self.store, self.conversation_id, name,
                                                           arguments, self.settings))

    async def record_round(self, calls: list[JSON], results: list[Message]) -> None:
        """Audit the round with secrets redacted: results hold expanded original text."""
        redacted = [_redacted(c) for c in calls], [_redacted(r) for r in results]
        await self.runner.run(lambda: self.store.record_tool_round(self.conversation_id, *redacted))


def _redacted(obj: Any) -> Any:
    """`redact_obj`, looking inside JSON-encoded strings (tool arguments and results) too."""
    if isinstance(obj, str):
        try:
            decoded = json.loads(obj)
        except ValueError:
            return redact_obj(obj)
        if isinstance(decoded, dict | list):
            return json.dumps(_redacted(decoded), ensure_ascii=False)
        return redact_obj(obj)
    if isinstance(obj, dict):
        return {key: _redacted(value) for key, value in obj.items()}
    if isinstance(obj, list):
        return [_redacted(value) for value in obj]
    return obj


def for_turn(upstream: Upstream, settings: RecallSettings, runner: StoreRunner, store: TenantAccess,
             prepared: PreparedRequest, model: str,
             on_call: Callable[[str], None] | None = None) -> Upstream:
    """The transport for this turn: `upstream` itself, or wrapped by the recall loop.

    Whether to offer follows the prepared request (`recall.should_offer`): the request-level
    decision the engine rendered its hints from (ChatTurn.offer_recall: recall enabled, rounds
    left, `n` of 1, no client tool with our names) and something hidden from the context.
    Results are cut to what the prepared request left free, counted with `model`'s tokenizer.
    """
    if not recall.should_offer(prepared, settings):
        return upstream
    tools = StoreRecallTools(store, prepared.conversation_id, settings, on_call, runner)
    counter = TokenCounter.for_model(model)
    return RecallUpstream(upstream, tools, settings.max_rounds,
                          lambda: ResultBudget.for_prepared(prepared, counter, settings))


def for_request(app: web.Application, upstream: Upstream, prepared: PreparedRequest, tenant_id: str,
                model: str) -> Upstream:
    """`for_turn` with the app's recall settings, engine host, the tenant's store and metrics."""
    metrics = app[appkeys.METRICS]
    return for_turn(upstream, app[appkeys.SETTINGS].recall, app[appkeys.HOST],
                    app[appkeys.STORE].for_tenant(tenant_id), prepared, model,
                    lambda op: metrics.recall_call(op, "tool_loop"))


@dataclass
class _Bound:
    """The transport bound to one request's params and key: the loop's `RoundTransport`."""

    upstream: Upstream
    params: LiteLLMParams
    api_key: str | None
    headers: dict[str, str] | None = None  # the first round's relayed headers

    async def complete(self, body: JSON) -> JSON:
        reply = await self.upstream.complete(self.params, body, self.api_key)
        self.headers = reply.headers if self.headers is None else self.headers
        return reply.data

    async def stream(self, body: JSON) -> AsyncGenerator[JSON, None]:
        reply = await self.upstream.open_stream(self.params, body, self.api_key)
        self.headers = reply.headers if self.headers is None else self.headers
        try:
            async for block in reply.events():
                chunk = _chunk(block)
                if chunk is DONE:
                    return
                if isinstance(chunk, dict):
                    yield chunk
            raise UpstreamError("upstream stream ended before [DONE]")
        finally:
            await reply.aclose()


def _chunk(block: bytes) -> JSON | bytes | None:
    """The chunk object of one SSE block, DONE at the end, None for comments and non-JSON data.

    The provider's in-band error is raised: relayed as it is when JSON, wrapped otherwise.
    """
    event = classify(block)
    if event.kind == "done":
        return DONE
    if event.kind == "error":
        raise UpstreamHTTPError(502, event.body or {"error": {
            "message": event.data.decode("utf-8", "replace"), "type": "upstream_error",
            "code": "upstream_error"}})
    return event.body if event.kind == "chunk" else None


@dataclass
class RecallUpstream:
    """An `Upstream` that answers the model's recall tool calls itself (proxy/recall/tool_loop.py)."""

    inner: Upstream
    tools: StoreRecallTools
    max_rounds: int
    new_limit: Callable[[], ResultLimit] | None = None  # a fresh result budget per turn

    def loop(self, rounds: RoundTransport) -> ToolLoop:
        """A fresh tool loop over `rounds` (its own result budget): one per turn."""
        return ToolLoop(self.tools, rounds, self.max_rounds, self.new_limit() if self.new_limit else None)

    async def complete(self, params: LiteLLMParams, body: dict[str, Any],
                       api_key: str | None) -> UpstreamReply:
        bound = _Bound(self.inner, params, api_key)
        data = await self.loop(bound).complete(body)
        return UpstreamReply(200, compact_json(data), data, bound.headers or {})

    async def open_stream(self, params: LiteLLMParams, body: dict[str, Any],
                          api_key: str | None) -> StreamingReply:
        """Runs until the first chunk for the client, so an early failure is a plain error reply."""
        bound = _Bound(self.inner, params, api_key)
        chunks = self.loop(bound).stream(body)
        try:
            first: JSON | None = await anext(chunks)
        except StopAsyncIteration:
            first = None
        except BaseException:
            await chunks.aclose()
            raise
        return _LoopStream(chunks, first, bound.headers or {})


@dataclass
class _LoopStream:
    """The client's side of a looped stream, as SSE blocks (without the blank-line separator)."""

    chunks: AsyncGenerator[JSON, None]
    first: JSON | None
    headers: dict[str, str] = field(default_factory=dict)
    status: int = 200

    async def events(self) -> AsyncIterator[bytes]:
        if self.first is not None:
            yield _encode(self.first)
        async for chunk in self.chunks:
            yield _encode(chunk)
        yield b"data: " + DONE

    async def aclose(self) -> None:
        await self.chunks.aclose()


def _encode(chunk: JSON) -> bytes:
    return b"data: " + compact_json(chunk)
