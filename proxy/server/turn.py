"""The turn pipeline the chat, Responses and Messages handlers share: prepare, call upstream, relay, store.

No compaction logic lives here: the engine decides what is forwarded (`Engine.prepare`), stores the
reply (`record_reply`) and schedules background work (`after_turn`). This module only speaks HTTP.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from aiohttp import web

from compaction import ChatTurn, Credentials, Message, PreparedRequest, recall
from config.errors import (
    InvalidRequestError,
    ModelNotFoundError,
    StoreUnwritableError,
    UpstreamHTTPError,
)
from config.settings import FAST_PATH_BODY_PARAMS, LiteLLMParams, ModelEntry, ServerSettings
from proxy import appkeys
from proxy.engine_host import Preparing
from proxy.error_mapping import to_ctxproxy_error
from proxy.server.auth import bearer_key, tenant_of
from proxy.server.body import RAW_BODY
from proxy.server.middleware import CLIENT_CLOSED, FINISHING, PREPARED_RESPONSE, note_unwritable
from proxy.server.params import validate_params
from proxy.server.warmup import WARMUP
from proxy.upstream.openai import StreamingReply, UpstreamReply, uses_openai_wire
from proxy.wire import sse
from proxy.wire.openai import EncodedBody, EncodedMessages

Outcome = TypeVar("Outcome")
Relay = Callable[[AsyncIterator[bytes], sse.Writer], Awaitable[Outcome]]  # events, write -> outcome
ReplyOf = Callable[["Turn", UpstreamReply], "Message | None"]  # the message to store, if any
CONVERSATION_HEADER = "X-Conversation-Id"
MAX_CONVERSATION_ID_CHARS = 256
CLIENT_ACCOUNT_HEADERS = frozenset({"openai-organization", "openai-project", "openai-beta"})
CLIENT_HEADERS = frozenset({"user-agent"})  # forwarded whoever's key is used
SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache",
               "X-Accel-Buffering": "no"}


@dataclass
class Turn:
    """The proxy's state for one client request (any of the three APIs), passed between the stages
    below: the engine's input (`turn`, a ChatTurn), its answer (`prepared`) and what goes upstream."""

    request: web.Request
    started: float
    turn: ChatTurn
    prepared: PreparedRequest
    params: LiteLLMParams
    body: dict[str, Any]  # what is forwarded
    api_key: str | None  # upstream key: the model entry's own, else the client's
    settled: concurrent.futures.Future[PreparedRequest] | None = None  # an early forward's full preparation


async def prepare_turn(request: web.Request, body: dict[str, Any], started: float) -> Turn:
    """Resolve the model and tenant, build the ChatTurn and let the engine prepare it.
    Every API's turn comes here in the chat form: its parameters are checked here, once."""
    app = request.app
    await app[WARMUP].done.wait()  # litellm and tokenizers load off the loop at start-up
    validate_params(body)
    record = request[appkeys.RECORD]
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequestError("you must provide a model parameter", param="model",
                                  code="missing_required_parameter")
    record.model, record.stream = model, body.get("stream") is True
    entry = app[appkeys.SETTINGS].find_model(model)
    if entry is None:
        raise ModelNotFoundError(f"The model `{model}` does not exist or is not served by this proxy",
                                 param="model")
    client_key = bearer_key(request)  # a required key was checked before routing (auth.py)
    tenant = record.tenant_id = tenant_of(request)
    turn = await _build_turn(request, body, entry, tenant, client_key)
    preparing = await app[appkeys.HOST].prepare(turn)  # off this loop
    app[appkeys.STORE_HEALTH].wrote()  # the turn was recorded: the store takes writes
    prepared = preparing.request
    record.conversation_id = prepared.conversation_id
    record.tokens_received, record.tokens_forwarded = prepared.tokens_received, prepared.tokens_forwarded
    record.compacted = prepared.compacted
    record.budget_unused_ratio = prepared.budget_unused_ratio
    record.summarizer_wait = prepared.waited_on_summarizer
    record.forced_truncation = prepared.forced_truncation
    record.compaction_steps = len(prepared.events)
    app[appkeys.METRICS].observe_prepared(prepared, early=preparing.settled is not None)
    if preparing.settled is None:  # an early forward's cost is known once it settles (finish_turn)
        note_cost(request, prepared)
    params = upstream_params(turn.upstream, app[appkeys.SETTINGS].server, request.headers)
    return Turn(request, started, turn, prepared, params, forward_body(body, prepared, params),
                params.api_key or client_key, preparing.settled)


def upstream_params(params: LiteLLMParams, server: ServerSettings,
                    client_headers: Mapping[str, str]) -> LiteLLMParams:
    """The entry's params as this request uses them.

    litellm's `timeout`/`stream_timeout` default to server.upstream_timeout_s (the fast path gets
    the same limit from its session). The client's User-Agent always reaches an OpenAI-wire upstream;
    its OpenAI-Organization/-Project/-Beta headers only with the client's own key: with the
    operator's key they would pick the operator's organisation or project.
    """
    extra = {"timeout": server.upstream_timeout_s, "stream_timeout": server.upstream_timeout_s,
             **params.extra}
    if uses_openai_wire(params):
        passed = CLIENT_HEADERS | (CLIENT_ACCOUNT_HEADERS if params.api_key is None else frozenset())
        forwarded = {k: v for k, v in client_headers.items() if k.lower() in passed}
        configured = params.extra.get("extra_headers") or params.extra.get("headers")
        if forwarded and (configured is None or isinstance(configured, dict)):
            extra["extra_headers"] = {**forwarded, **(configured or {})}  # the operator's win
    return replace(params, extra=extra)


async def _build_turn(request: web.Request, body: dict[str, Any], entry: ModelEntry, tenant: str,
                      client_key: str | None) -> ChatTurn:
    model = body["model"]
    messages = body.get("messages")  # not a list: no messages, which the engine refuses (400, "messages")
    tools = body.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise InvalidRequestError("tools must be a list of objects", param="tools")
    window = await request.app[appkeys.WINDOWS].window(model)
    offer = recall.offered_for_request(request.app[appkeys.SETTINGS].recall, n=body.get("n"),
                                       client_tools=tools)
    return ChatTurn(
        tenant_id=tenant, model=model, upstream=entry.resolved_params(model),
        settings=entry.compaction, context_window=window,
        messages=tuple(messages) if isinstance(messages, list) else (),
        tools=tuple(tools), max_reply_tokens=_max_reply_tokens(body),
        external_conversation_id=conversation_header(request),
        credentials=Credentials(client_key), offer_recall=offer)


def conversation_header(request: web.Request) -> str | None:
    """The client's `X-Conversation-Id`, refused (400) unless it is short and printable (bytes that
    are not UTF-8 were refused for every header by the error middleware's `check_headers`)."""
    value = request.headers.get(CONVERSATION_HEADER)
    if not value:
        return None
    if len(value) > MAX_CONVERSATION_ID_CHARS:
        raise _bad_header(f"is longer than {MAX_CONVERSATION_ID_CHARS} characters")
    if not value.isprintable():
        raise _bad_header("holds control characters")
    return value


def _bad_header(why: str) -> InvalidRequestError:
    return InvalidRequestError(f"Invalid {CONVERSATION_HEADER} header: the value {why}",
                               param=CONVERSATION_HEADER, code="invalid_header")


def _max_reply_tokens(body: dict[str, Any]) -> int | None:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def forward_body(body: dict[str, Any], prepared: PreparedRequest, params: LiteLLMParams) -> dict[str, Any]:
    """The client's body with model, messages and tools replaced (and a fast-path entry's body params).

    `prepared.messages` never carry `pinned` (the engine's contract, tested in tests/compaction).
    """
    out = dict(body)
    if params.uses_openai_wire:  # the entry's body params, as litellm applies them on its path
        out.update({k: v for k, v in params.extra.items() if k in FAST_PATH_BODY_PARAMS})
    out["model"] = params.upstream_model
    out["messages"] = (list(prepared.messages) if prepared.messages_json is None
                       else EncodedMessages(prepared.messages, prepared.messages_json))
    if prepared.tools:
        out["tools"] = list(prepared.tools)
    out.pop("pinned", None)
    return out


def forwarded_as_received(t: Turn) -> bool:
    """Whether the engine forwards the request's messages themselves (an uncompacted conversation's
    plan is its request): no summary, anchor, elision or step, one forwarded message per received
    one. A route translating another API then forwards the client's own body, not a rebuilt one."""
    prepared = t.prepared
    return (not prepared.compacted and not prepared.forced_truncation and not prepared.events
            and len(prepared.messages) == len(t.turn.messages))


def client_body(t: Turn, body: dict[str, Any]) -> dict[str, Any]:
    """The client's own body for the provider (`forwarded_as_received`), under the provider's name
    for the model: the client's very bytes when that name is the one it sent."""
    if body.get("model") == t.params.upstream_model and RAW_BODY in t.request:
        return EncodedBody(body, t.request[RAW_BODY])
    return {**body, "model": t.params.upstream_model}


def ctxproxy_headers(t: Turn, upstream_s: float) -> dict[str, str]:
    overhead_ms = max(0.0, (time.perf_counter() - t.started - upstream_s) * 1000)
    t.request[appkeys.RECORD].overhead_ms = round(overhead_ms, 3)
    return {"X-Ctxproxy-Conversation-Id": t.prepared.conversation_id,
            "X-Ctxproxy-Tokens-Forwarded": str(t.prepared.tokens_forwarded),
            "X-Ctxproxy-Compacted": "true" if t.prepared.compacted else "false",
            "X-Ctxproxy-Overhead-Ms": f"{overhead_ms:.3f}",
            "X-Ctxproxy-Summarizer-Wait": "true" if t.prepared.waited_on_summarizer else "false"}


async def relay_reply(t: Turn, calling: Awaitable[UpstreamReply], reply_of: ReplyOf) -> web.Response:
    """Forward one non-streaming call and relay its JSON body unchanged: the one non-streaming path
    of the chat, Responses and Messages handlers. The reply (`reply_of`) is stored before the client
    is answered, so an answered reply survives the process being killed (tests/e2e/
    test_kill_durability.py). A failure to store it is logged and counted, never turned into an
    error: the client has its answer, and resends the reply with its next request (ingested then)."""
    reply, upstream_s = await timed_call(t, calling)
    await _finish_logged(t, finish_turn(t, reply_of(t, reply)))
    headers = {**reply.headers, **ctxproxy_headers(t, upstream_s)}
    observe_timing(t, upstream_s)
    return web.Response(body=reply.raw, status=200, content_type="application/json", headers=headers)


async def timed_call(t: Turn, calling: Awaitable[UpstreamReply]) -> tuple[UpstreamReply, float]:
    """The reply of one upstream call and its seconds; the upstream status is recorded either way."""
    record = t.request[appkeys.RECORD]
    began = time.perf_counter()
    try:
        reply = await calling
    except UpstreamHTTPError as exc:
        record.upstream_status = exc.upstream_status
        raise
    record.upstream_status = reply.status
    return reply, time.perf_counter() - began


async def finish_turn(t: Turn, reply: Message | None) -> None:
    """Store the reply (when there is one) and the provider's cache reads, and schedule background
    work, on the engine thread; an early forward's cost is noted once its preparation settled."""
    record = t.request[appkeys.RECORD]
    await t.request.app[appkeys.HOST].finish_turn(Preparing(t.prepared, t.settled), t.turn, reply,
                                                  record.cache_read_tokens)
    if record.cache_read_tokens is not None:
        t.request.app[appkeys.METRICS].observe_cache_read(record.cache_read_tokens)
    if t.settled is not None and t.settled.done() and t.settled.exception() is None:
        note_cost(t.request, t.settled.result())


def note_cost(request: web.Request, prepared: PreparedRequest) -> None:
    """The recorded request's shared prefix and billed-input estimates: on its log line and metrics."""
    record = request[appkeys.RECORD]
    record.prefix_tokens = prepared.prefix_tokens
    record.billed_input_tokens_estimate = prepared.billed_input_estimate
    record.full_history_billed_estimate = prepared.full_history_billed_estimate
    request.app[appkeys.METRICS].observe_cost(prepared)


async def relay_stream(t: Turn, opening: Awaitable[StreamingReply], relay: Relay[Outcome],
                       finish: Callable[[Turn, Outcome], Awaitable[None]]) -> web.StreamResponse:
    """Relay an upstream event stream to the client as it arrives, then `finish` (store the reply):
    the one streaming path of the chat, Responses and Messages handlers."""
    record = t.request[appkeys.RECORD]
    began = time.perf_counter()
    try:
        stream = await opening
    except UpstreamHTTPError as exc:
        record.upstream_status = exc.upstream_status
        raise
    record.upstream_status = stream.status
    response = web.StreamResponse(status=200, headers={
        **stream.headers, **SSE_HEADERS, **ctxproxy_headers(t, time.perf_counter() - began)})
    try:
        await response.prepare(t.request)
        t.request[PREPARED_RESPONSE] = response  # from here on, errors must not start a new response
        outcome = await relay(stream.events(), response.write)
        upstream_s = time.perf_counter() - began
        # Shielded: a client leaving right after the last event cancels this handler, not the write.
        finishing = t.request[FINISHING] = asyncio.ensure_future(_finish_logged(t, finish(t, outcome)))
        await asyncio.shield(finishing)
    except ConnectionResetError:
        # The client went away mid-stream: the upstream request is dropped (finally), nothing stored.
        record.status, record.error_code = CLIENT_CLOSED, "client_disconnected"
        return response
    except asyncio.CancelledError:  # the same, under handler_cancellation
        record.status, record.error_code = CLIENT_CLOSED, "client_disconnected"
        raise
    finally:
        await stream.aclose()
    observe_timing(t, upstream_s, header_overhead=True)
    await response.write_eof()
    return response


async def _finish_logged(t: Turn, finishing: Awaitable[None]) -> None:
    """Await `finishing`; a failure is logged, never re-sent: the client already has its reply."""
    try:
        await finishing
    except Exception as exc:
        t.request[appkeys.RECORD].error_code = "reply_store_failed"
        log_store_failure(t, exc)


def log_store_failure(t: Turn, exc: BaseException | None) -> None:
    """A reply the client has but the store does not: one log line and the failure counter (a full
    or read-only store also counted and shown as such)."""
    app = t.request.app
    app[appkeys.METRICS].reply_store_failed()
    mapped = to_ctxproxy_error(exc) if exc is not None else None
    if isinstance(mapped, StoreUnwritableError):
        note_unwritable(app, mapped, conversation_id=t.prepared.conversation_id)
    app[appkeys.LOGGER].error(
        "reply_store_failed", conversation_id=t.prepared.conversation_id,
        error=mapped.message if mapped is not None else type(exc).__name__)


def cached_prompt_tokens(usage: Mapping[str, Any] | None) -> int | None:
    """`usage.prompt_tokens_details.cached_tokens` of a chat completion, when the provider reports it."""
    details = (usage or {}).get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return cached if isinstance(cached, int) else None


def observe_timing(t: Turn, upstream_s: float, header_overhead: bool = False) -> None:
    metrics = t.request.app[appkeys.METRICS]
    record = t.request[appkeys.RECORD]
    metrics.observe_upstream_latency(upstream_s)
    if header_overhead and record.overhead_ms is not None:
        metrics.observe_overhead(record.overhead_ms / 1000)
    else:
        metrics.observe_overhead(max(0.0, time.perf_counter() - t.started - upstream_s))
