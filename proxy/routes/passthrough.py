"""Every other /v1/ path (embeddings, completions, files, audio, batches, ...) forwarded unchanged.

The body's `model` picks the entry when the body is JSON and names one; otherwise the first entry
speaking OpenAI's wire format serves the path. Bodies are streamed both ways; only a model alias is
rewritten to the provider's name (proxy/server/forward.py). No compaction happens here: these APIs
carry no conversation.
"""

from __future__ import annotations

from aiohttp import web

from config.errors import InvalidRequestError, MethodNotAllowedError
from proxy.server.body import read_body, read_json_object
from proxy.server.forward import client_tail, forward_routed
from proxy.upstream.forwarding import Body

BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


async def forward(request: web.Request) -> web.StreamResponse:
    """Forward `/v1/{tail}` to the routed entry's upstream and stream its answer back."""
    await refuse_wrong_method(request)
    body, model = await _body_and_model(request)
    return await forward_routed(request, client_tail(request), body, model)


async def refuse_wrong_method(request: web.Request) -> None:
    """405 (with Allow) when another route serves this path with other methods."""
    own = request.match_info.route.resource
    for resource in request.app.router.resources():
        if resource is own:
            continue
        match, allowed = await resource.resolve(request)
        if match is None and allowed:
            raise MethodNotAllowedError(f"{request.method} is not allowed on {request.path}",
                                        sorted(allowed))


async def _body_and_model(request: web.Request) -> tuple[Body, str | None]:
    """A JSON body is read (to route by its `model`); any other body is streamed untouched."""
    if request.method not in BODY_METHODS or not request.body_exists:
        return None, None
    if request.content_type != "application/json":
        return request.content.iter_any(), None
    raw_body = await read_body(request)
    try:
        model = (await read_json_object(request)).get("model")
    except InvalidRequestError:
        return raw_body, None  # the provider answers malformed bodies in its own words
    return raw_body, model if isinstance(model, str) and model else None
