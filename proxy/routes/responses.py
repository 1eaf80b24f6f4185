"""POST /v1/responses (OpenAI Responses API): `input` budgeted and compacted by the same engine.

The items are turned into the canonical chat form (proxy/wire/responses.py), prepared by the engine
like any chat turn, turned back into items and sent to the provider's /responses; the reply's
`output` is stored as one assistant message. A request chaining `previous_response_id` keeps its
state on the provider and is forwarded untouched, as is any entry not speaking OpenAI's wire format.
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from compaction import Message
from proxy import appkeys
from proxy.recall import responses_stream as looped_responses
from proxy.recall import transport
from proxy.recall.responses import ResponsesAsChat, client_response
from proxy.recall.transport import RecallUpstream
from proxy.server import ownership
from proxy.server.auth import tenant_of
from proxy.server.body import read_body, read_json_object
from proxy.server.forward import forward_routed
from proxy.server.params import RESPONSES_PARAMS, validate_params
from proxy.server.turn import (
    Turn,
    client_body,
    finish_turn,
    forwarded_as_received,
    prepare_turn,
    relay_reply,
    relay_stream,
)
from proxy.upstream.openai import OpenAIUpstream, UpstreamReply
from proxy.wire import responses as wire
from proxy.wire import responses_stream
from proxy.wire.openai import compact_json


async def responses(request: web.Request) -> web.StreamResponse:
    started = time.perf_counter()
    body = await read_json_object(request, resend_scope=tenant_of(request), history="input")
    validate_params(body, RESPONSES_PARAMS)
    model = body.get("model")
    if not _compactable(request, body):
        name = model if isinstance(model, str) and model else None
        return await forward_routed(request, "responses", await read_body(request), name)
    await ownership.require_references(request, body)
    messages = wire.to_messages(wire.input_items(body), body.get("instructions"),
                                request.app[appkeys.RESPONSES_TRANSLATIONS], tenant_of(request))
    tools = body.get("tools") or []
    chat_body: dict[str, Any] = {"model": model, "messages": messages, "stream": body.get("stream") is True,
                                 "tools": [wire.chat_tool(t) if isinstance(t, dict) else t for t in tools]
                                 if isinstance(tools, list) else tools}
    if isinstance(body.get("max_output_tokens"), int):
        chat_body["max_tokens"] = body["max_output_tokens"]
    t = await prepare_turn(request, chat_body, started)
    t.body = forward_body(body, t)
    upstream = OpenAIUpstream(request.app[appkeys.SESSION], "responses")
    if body.get("stream") is True:
        return await _stream(t, upstream)
    return await _complete(t, upstream)


def _compactable(request: web.Request, body: dict[str, Any]) -> bool:
    """False for chained requests (state on the provider) and entries without OpenAI's wire."""
    if body.get("previous_response_id"):
        return False
    model = body.get("model")
    entry = request.app[appkeys.SETTINGS].find_model(model) if isinstance(model, str) else None
    return entry is None or entry.resolved_params(str(model)).uses_openai_wire


def forward_body(body: dict[str, Any], t: Turn) -> dict[str, Any]:
    """The client's body with model, instructions and input as the engine prepared them."""
    if forwarded_as_received(t):  # every item and the instructions as the client sent them
        return client_body(t, body)
    translations = t.request.app[appkeys.RESPONSES_TRANSLATIONS]
    instructions, items = wire.from_messages(t.prepared.messages, translations)
    out = {**body, "model": t.params.upstream_model, "input": items}
    if instructions is not None:
        out["instructions"] = instructions
    return out


def _reply_message(t: Turn, response: dict[str, Any]) -> Message | None:
    """The reply's output items, as one assistant message to store after the request's last one."""
    output = response.get("output")
    items = [i for i in output if isinstance(i, dict)] if isinstance(output, list) else []
    completed = items and response.get("status", "completed") == "completed"
    usage = response.get("usage")
    if isinstance(usage, dict):
        record = t.request[appkeys.RECORD]
        record.tokens_out = usage.get("output_tokens")
        details = usage.get("input_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        record.cache_read_tokens = cached if isinstance(cached, int) else None
    return wire.assistant_message(items) if completed else None


async def _complete(t: Turn, upstream: OpenAIUpstream) -> web.StreamResponse:
    return await relay_reply(t, _call_recorded(t, upstream),
                             lambda turn, reply: _reply_message(turn, reply.data))


async def _call_recorded(t: Turn, upstream: OpenAIUpstream) -> UpstreamReply:
    """The reply, its response noted as the caller's when the operator's key created it."""
    reply = await _call(t, upstream)
    await ownership.record_created(t.request, t.params, "response", reply.data)
    return reply


def _recall(t: Turn, upstream: OpenAIUpstream) -> tuple[RecallUpstream, ResponsesAsChat] | None:
    """The recall tool loop over `upstream` when this request offers the recall tools, else None."""
    adapter = ResponsesAsChat(upstream, t.body, t.request.app[appkeys.SETTINGS].recall)
    looped = transport.for_request(t.request.app, adapter, t.prepared, t.turn.tenant_id, t.turn.model)
    return (looped, adapter) if isinstance(looped, RecallUpstream) else None


def _chat(t: Turn) -> dict[str, Any]:
    """The loop's chat body: the prepared messages and the client's tools in chat form."""
    return {"model": t.body["model"], "messages": list(t.prepared.messages), "tools": list(t.prepared.tools)}


async def _call(t: Turn, upstream: OpenAIUpstream) -> UpstreamReply:
    """One upstream call, or the recall tool loop when this request offers the recall tools."""
    recall = _recall(t, upstream)
    if recall is None:
        return await upstream.complete(t.params, t.body, t.api_key)
    looped, adapter = recall
    reply = await looped.complete(t.params, _chat(t), t.api_key)
    final = client_response(adapter.last, reply.data.get("usage"), adapter.settings)
    return UpstreamReply(200, compact_json(final), final, reply.headers)


async def _stream(t: Turn, upstream: OpenAIUpstream) -> web.StreamResponse:
    recall = _recall(t, upstream)
    opening = (upstream.open_stream(t.params, t.body, t.api_key) if recall is None
               else looped_responses.open_stream(*recall, t.params, _chat(t), t.api_key))
    return await relay_stream(t, opening, responses_stream.relay, _finish_stream)


async def _finish_stream(t: Turn, outcome: responses_stream.ResponsesOutcome) -> None:
    await ownership.record_created(t.request, t.params, "response", outcome.response)
    if outcome.complete and outcome.response is not None:
        # A failure to store is logged by relay_stream (the client has its reply).
        await finish_turn(t, _reply_message(t, outcome.response))
        return
    t.request[appkeys.RECORD].error_code = outcome.error.code if outcome.error else "stream_incomplete"
    t.request.app[appkeys.LOGGER].warning("stream_broken", conversation_id=t.prepared.conversation_id,
                                          error=str(outcome.error), stored_reply=False)
    await finish_turn(t, None)
