"""Forwarding one request unchanged to the model entry that serves it, for every route that forwards.

The passthrough routes, /v1/models/{id} and the Responses API's provider objects use it. The path is
appended to the entry's api_base still encoded and never leaves it (proxy/upstream/paths.py);
through an operator-keyed entry, provider objects are the creating tenant's own
(proxy/server/ownership.py).
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from config.errors import InvalidRequestError, ModelNotFoundError, NotFoundError
from config.settings import LiteLLMParams, ModelEntry, Settings
from proxy import appkeys
from proxy.server import ownership
from proxy.server.auth import bearer_key
from proxy.server.middleware import PREPARED_RESPONSE, SERVED_PATHS
from proxy.upstream.forwarding import Body, Forwarded, outgoing_headers, relay, relay_whole, upstream_url
from proxy.upstream.paths import raw_tail
from proxy.wire.openai import compact_json


def client_tail(request: web.Request) -> str:
    """The path after `/v1/` exactly as the client encoded it (never the decoded match)."""
    return raw_tail(request.rel_url.raw_path, 1)


async def forward_routed(request: web.Request, tail: str, body: Body,
                         model: str | None) -> web.StreamResponse:
    """Forward to the entry `model` names (the default entry without one), the alias renamed."""
    request[appkeys.RECORD].model = model
    params = _params_for(request.app[appkeys.SETTINGS], model, request.path)
    if model is not None and isinstance(body, bytes) and params.upstream_model != model:
        body = _renamed(body, params.upstream_model)
    return await forward_to(request, params, tail, body,
                            body_rewritten=model is not None and isinstance(body, bytes))


async def forward_to(request: web.Request, params: LiteLLMParams, tail: str, body: Body, *,
                     body_rewritten: bool) -> web.StreamResponse:
    """Relay one request to `params`' upstream at `{api_base}/{tail}` (shared with /v1/models/{id});
    `tail` is still percent-encoded and must stay under api_base's path (else 400)."""
    shown = f"{request.method} {request.rel_url.raw_path}"
    url = upstream_url(params, tail, request.rel_url.raw_query_string, shown)
    headers = outgoing_headers(request.headers, params, body_rewritten=body_rewritten,
                               client_key=bearer_key(request))
    owned = await ownership.guard(request, params, tail, body)
    out = Forwarded(request.method, url, headers, body)
    session, operator_key = request.app[appkeys.SESSION], params.api_key is not None
    if owned is not None and owned.buffers:
        whole, status = await relay_whole(session, out, operator_key=operator_key, rewrite=owned.answered)
        request[appkeys.RECORD].upstream_status = status
        return whole

    def started(response: web.StreamResponse) -> None:
        request[PREPARED_RESPONSE] = response

    response, status = await relay(session, out, request, operator_key=operator_key, started=started,
                                   tap=owned.tap if owned is not None else None)
    request[appkeys.RECORD].upstream_status = status
    if owned is not None:
        await owned.finished(status)
    return response


def _params_for(settings: Settings, model: str | None, path: str) -> LiteLLMParams:
    if model is not None:
        entry = settings.find_model(model)
        if entry is None:
            raise ModelNotFoundError(f"The model `{model}` does not exist or is not served by this "
                                     "proxy", param="model")
        params = entry.resolved_params(model)
        if not params.uses_openai_wire:
            raise InvalidRequestError(f"{path} is forwarded only to OpenAI-compatible upstreams; "
                                      f"`{model}` is served by {params.provider}",
                                      code="unsupported_endpoint")
        return params
    entry_or_none = default_entry(settings)
    if entry_or_none is None:
        raise NotFoundError(f"ctxproxy cannot route {path}: no model entry speaks OpenAI's wire "
                            f"format; it serves {SERVED_PATHS}")
    return entry_or_none.litellm_params


def default_entry(settings: Settings) -> ModelEntry | None:
    """The entry serving requests that name no model: the first speaking OpenAI's wire format."""
    return next((m for m in settings.model_list if m.litellm_params.uses_openai_wire), None)


def _renamed(raw: bytes, upstream_model: str) -> bytes:
    """The JSON body with `model` set to the provider's name for it (an alias or a wildcard)."""
    data: dict[str, Any] = json.loads(raw)
    data["model"] = upstream_model
    return compact_json(data)
