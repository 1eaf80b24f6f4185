"""POST /v1/messages and /v1/messages/count_tokens (Anthropic Messages API), compacted by the engine.

The request becomes the canonical chat form (proxy/wire/anthropic.py) and is prepared like any chat
turn. `anthropic/...` entries get it back as Messages JSON over HTTP (proxy/upstream/anthropic.py),
with a cache breakpoint after ctxproxy's stable prefix; other entries get the chat form through the
usual transports and their reply is translated back (proxy/wire/anthropic_translate.py). A turn
offering the recall tools runs the recall loop on either (proxy/recall/messages.py and
messages_stream.py natively, proxy/recall/transport.py on the chat form).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from aiohttp import web

from compaction import Message, TokenCounter
from config.errors import ModelNotFoundError
from proxy import appkeys
from proxy.recall import messages as recall_messages
from proxy.recall import messages_stream, transport
from proxy.recall.messages import MessagesAsChat
from proxy.recall.transport import RecallUpstream
from proxy.server import ownership
from proxy.server.auth import bearer_key, tenant_of
from proxy.server.body import read_json_object
from proxy.server.middleware import PREPARED_RESPONSE
from proxy.server.params import validate_messages_params
from proxy.server.turn import (
    SSE_HEADERS,
    Turn,
    client_body,
    ctxproxy_headers,
    finish_turn,
    forwarded_as_received,
    observe_timing,
    prepare_turn,
    relay_reply,
    relay_stream,
    timed_call,
)
from proxy.upstream.anthropic import AnthropicUpstream
from proxy.wire import anthropic as wire
from proxy.wire import anthropic_stream
from proxy.wire import anthropic_translate as translate


async def messages(request: web.Request) -> web.StreamResponse:
    started = time.perf_counter()
    body = await read_json_object(request, resend_scope=tenant_of(request))
    validate_messages_params(body)
    await ownership.require_references(request, body)
    translated = wire.to_messages(body, request.app[appkeys.TRANSLATIONS], tenant_of(request))
    chat_body: dict[str, Any] = {"model": body.get("model"), "messages": translated,
                                 "tools": translate.chat_tools(body.get("tools")),
                                 "stream": body.get("stream") is True}
    if isinstance(body.get("max_tokens"), int):
        chat_body["max_tokens"] = body["max_tokens"]
    t = await prepare_turn(request, chat_body, started)
    if not t.params.uses_anthropic_wire:
        return await translate_turn(t, body)
    t.body = forward_body(body, t)
    upstream = AnthropicUpstream(request.app[appkeys.SESSION], request.headers)
    recall = _recall(t, body, upstream)
    if body.get("stream") is True:
        return await _stream(t, upstream, recall)
    return await _complete(t, upstream, recall)


def forward_body(body: dict[str, Any], t: Turn) -> dict[str, Any]:
    """The client's body with model, system and messages as the engine prepared them."""
    if forwarded_as_received(t):  # every turn and the system as the client sent them
        return client_body(t, body)
    system, turns = wire.from_messages(t.prepared.messages)
    turns = wire.with_client_marks(turns, body.get("messages"))  # the marks where the client put them
    out = {**body, "model": t.params.upstream_model, "messages": turns}
    client_system = body.get("system")
    if isinstance(client_system, str) and system == [{"type": "text", "text": client_system}]:
        out["system"] = client_system
    elif system:
        client_blocks = len(client_system) if isinstance(client_system, list) else int(bool(client_system))
        out["system"] = wire.mark_stable_prefix(system, client_blocks, wire.cache_breakpoints(body))
    else:
        out.pop("system", None)
    return out


def _reply_message(t: Turn, message: dict[str, Any]) -> Message | None:
    """The reply's content blocks as one assistant message to store; usage (and cache reads) noted."""
    content = message.get("content")
    _note_usage(t, message.get("usage"))
    stored = isinstance(content, list) and bool(content)
    return wire.assistant_turn(content)[0] if stored else None


def _note_usage(t: Turn, usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    record = t.request[appkeys.RECORD]
    record.tokens_out = usage.get("output_tokens")
    cached = usage.get("cache_read_input_tokens")
    record.cache_read_tokens = cached if isinstance(cached, int) else None


Recall = tuple[RecallUpstream, MessagesAsChat] | None


def _recall(t: Turn, body: dict[str, Any], upstream: AnthropicUpstream) -> Recall:
    """The recall tool loop over `upstream` when this turn offers the recall tools, else None."""
    settings = t.request.app[appkeys.SETTINGS].recall
    adapter = MessagesAsChat(upstream, t.body, t.prepared.messages,
                             lambda head: forward_body(body, replace(t, prepared=replace(
                                 t.prepared, messages=tuple(head)))), settings)
    looped = transport.for_request(t.request.app, adapter, t.prepared, t.turn.tenant_id, t.turn.model)
    return (looped, adapter) if isinstance(looped, RecallUpstream) else None


def _chat(t: Turn) -> dict[str, Any]:
    """The loop's chat body: the prepared messages and the client's tools in chat form."""
    return {"model": t.params.upstream_model, "messages": list(t.prepared.messages),
            "tools": list(t.prepared.tools)}


async def _complete(t: Turn, upstream: AnthropicUpstream, recall: Recall) -> web.StreamResponse:
    calling = (upstream.complete(t.params, t.body, t.api_key) if recall is None
               else recall_messages.complete(*recall, t.params, _chat(t), t.api_key))
    return await relay_reply(t, calling, lambda turn, reply: _reply_message(turn, reply.data))


async def _stream(t: Turn, upstream: AnthropicUpstream, recall: Recall) -> web.StreamResponse:
    opening = (upstream.open_stream(t.params, t.body, t.api_key) if recall is None
               else messages_stream.open_stream(*recall, t.params, _chat(t), t.api_key))
    return await relay_stream(t, opening, anthropic_stream.relay, finish_stream)


async def finish_stream(t: Turn, outcome: anthropic_stream.MessagesOutcome) -> None:
    """Store a complete streamed reply; log a broken one (nothing stored)."""
    if outcome.complete:
        # A failure to store is logged by relay_stream (the client has its reply).
        await finish_turn(t, _reply_message(t, {"content": outcome.assembler.content(),
                                                "usage": outcome.assembler.usage}))
        return
    t.request[appkeys.RECORD].error_code = outcome.error.code if outcome.error else "stream_incomplete"
    t.request.app[appkeys.LOGGER].warning("stream_broken", conversation_id=t.prepared.conversation_id,
                                          error=str(outcome.error), stored_reply=False)
    await finish_turn(t, None)


async def translate_turn(t: Turn, body: dict[str, Any]) -> web.StreamResponse:
    """An entry not speaking Messages: the chat form through its transport, the reply translated."""
    t.body = translate.chat_request(t.body, body)
    upstream = transport.for_request(t.request.app, t.request.app[appkeys.UPSTREAMS].for_params(t.params),
                                     t.prepared, t.turn.tenant_id, t.turn.model)
    reply, upstream_s = await timed_call(t, upstream.complete(t.params, {**t.body, "stream": False},
                                                              t.api_key))
    message = translate.anthropic_message(reply.data, str(body.get("model")))
    await finish_turn(t, _reply_message(t, message))
    observe_timing(t, upstream_s)
    headers = {**reply.headers, **ctxproxy_headers(t, upstream_s)}
    if body.get("stream") is not True:
        return web.json_response(message, headers=headers)
    response = web.StreamResponse(status=200, headers={**headers, **SSE_HEADERS})
    await response.prepare(t.request)
    t.request[PREPARED_RESPONSE] = response
    for event in translate.stream_events(message):  # the whole reply, replayed as Messages events
        await response.write(event)
    await response.write_eof()
    return response


async def count_tokens(request: web.Request) -> web.StreamResponse:
    """Anthropic entries: the provider's own count of the request as sent. Others: counted here."""
    body = await read_json_object(request)
    model = body.get("model")
    entry = request.app[appkeys.SETTINGS].find_model(model) if isinstance(model, str) else None
    if entry is None or not isinstance(model, str):
        raise ModelNotFoundError(f"The model `{model}` does not exist or is not served by this proxy",
                                 param="model")
    params = entry.resolved_params(model)
    if params.uses_anthropic_wire:
        upstream = AnthropicUpstream(request.app[appkeys.SESSION], request.headers, "messages/count_tokens")
        reply = await upstream.complete(params, {**body, "model": params.upstream_model},
                                        params.api_key or bearer_key(request))
        return web.Response(body=reply.raw, content_type="application/json", headers=reply.headers)
    counter = TokenCounter.for_model(model)
    canonical = [translate.plain(m) for m in wire.to_messages(body)]
    total = counter.count_messages(canonical) + counter.count_tools(translate.chat_tools(body.get("tools")))
    return web.json_response({"input_tokens": total})
