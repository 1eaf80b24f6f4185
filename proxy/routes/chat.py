"""POST /v1/chat/completions: parse, hand the turn to the shared pipeline (proxy/server/turn.py), relay.

No compaction logic lives here: the engine decides what is forwarded (`Engine.prepare`), stores the
reply (`record_reply`) and schedules background work (`after_turn`). This module only speaks HTTP.
"""

from __future__ import annotations

import time

from aiohttp import web

from compaction import Message
from proxy import appkeys
from proxy.recall import transport
from proxy.server import ownership
from proxy.server.auth import tenant_of
from proxy.server.body import read_json_object
from proxy.server.turn import Turn, cached_prompt_tokens, finish_turn, prepare_turn, relay_reply, relay_stream
from proxy.upstream.openai import Upstream, UpstreamReply
from proxy.wire import sse
from proxy.wire.openai import first_message


async def chat_completions(request: web.Request) -> web.StreamResponse:
    started = time.perf_counter()
    body = await read_json_object(request, resend_scope=tenant_of(request))
    await ownership.require_references(request, body)
    t = await prepare_turn(request, body, started)
    upstream = request.app[appkeys.UPSTREAMS].for_params(t.params)
    # Recall tools offered this turn: the same transport, answering the model's recall calls itself.
    upstream = transport.for_request(request.app, upstream, t.prepared, t.turn.tenant_id, t.turn.model)
    if body.get("stream") is True:
        return await _stream(t, upstream)
    return await _complete(t, upstream)


async def _complete(t: Turn, upstream: Upstream) -> web.StreamResponse:
    return await relay_reply(t, upstream.complete(t.params, t.body, t.api_key), _reply_message)


def _reply_message(t: Turn, reply: UpstreamReply) -> Message | None:
    """The chat completion's message to store; its usage noted on the request record."""
    record = t.request[appkeys.RECORD]
    usage = reply.data.get("usage") if isinstance(reply.data.get("usage"), dict) else {}
    record.tokens_out = usage.get("completion_tokens") if usage else None
    record.cache_read_tokens = cached_prompt_tokens(usage)
    return first_message(reply.data)


async def _stream(t: Turn, upstream: Upstream) -> web.StreamResponse:
    return await relay_stream(t, upstream.open_stream(t.params, t.body, t.api_key), sse.relay,
                              _finish_stream)


async def _finish_stream(t: Turn, outcome: sse.RelayOutcome) -> None:
    record = t.request[appkeys.RECORD]
    record.tokens_out = outcome.assembler.completion_tokens
    record.cache_read_tokens = cached_prompt_tokens(outcome.assembler.usage)
    if outcome.complete and outcome.storable:
        await finish_turn(t, outcome.assembler.message())
        return
    record.error_code = outcome.error.code if outcome.error else (
        "stream_broken" if not outcome.complete else "reply_not_assembled")
    t.request.app[appkeys.LOGGER].warning(
        "stream_broken", conversation_id=t.prepared.conversation_id, error=str(outcome.error),
        stored_reply=False)
    await finish_turn(t, None)
