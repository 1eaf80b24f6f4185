"""Request middlewares: OpenAI-shaped errors, the canonical `request` log line, request metrics.

`observe_middleware` (outer) times the request and logs one line from its RequestRecord;
`error_middleware` (inner) turns every failure into `{"error": {...}}` with the right status, so
the outer one always sees a response. Unexpected exceptions are logged with their traceback and
answered with a generic 500 that leaks nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from config.errors import (
    CtxProxyError,
    InvalidRequestError,
    MethodNotAllowedError,
    NotFoundError,
    StoreUnwritableError,
    http_status,
)
from proxy import appkeys
from proxy.error_mapping import internal_error, to_ctxproxy_error
from proxy.observability.logging import RequestRecord
from proxy.server.body import CLOSE_CONNECTION
from proxy.wire.anthropic_errors import anthropic_error_body, is_anthropic_route

CLIENT_CLOSED = 499  # nginx's convention for "client closed the request"
QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
RECALL_ROUTES = {"/v1/context/search": "search", "/v1/context/expand": "expand"}
SERVED_PATHS = ("/v1/chat/completions, /v1/responses, /v1/messages, /v1/messages/count_tokens, "
                "/v1/models, /v1/context/search, /v1/context/expand, any other /v1/... path (forwarded "
                "to the model's upstream), /healthz, /readyz, /metrics and /ui")
# Set by a handler once its streamed response is prepared: a later error cannot start a new one.
PREPARED_RESPONSE = web.RequestKey("prepared_response", web.StreamResponse)
# A streamed reply's shielded bookkeeping (usage, cost, the stored reply): the request line waits for
# it, so a client leaving right after the last event still gets a complete line.
FINISHING: web.RequestKey[asyncio.Future[None]] = web.RequestKey("finishing", asyncio.Future)


def error_response(error: CtxProxyError, *, anthropic: bool = False) -> web.Response:
    """The HTTP response for a CtxProxyError (upstream errors keep their own status and body),
    in Anthropic's shape on the Anthropic routes."""
    status = http_status(error)
    body = anthropic_error_body(error, status) if anthropic else error.to_body()
    return web.json_response(body, status=status, headers=error.headers)


def _from_http_exception(request: web.Request, exc: web.HTTPException) -> CtxProxyError:
    if exc.status == 404:
        return NotFoundError(f"ctxproxy has no route for {request.method} {request.path}; it serves "
                             f"{SERVED_PATHS}", code="not_found")
    if isinstance(exc, web.HTTPMethodNotAllowed):
        return MethodNotAllowedError(f"{request.method} is not allowed on {request.path}",
                                     sorted(exc.allowed_methods))
    mapped = to_ctxproxy_error(exc)
    if mapped is not None:
        return mapped
    return InvalidRequestError(exc.reason or "request rejected")


def check_headers(request: web.Request) -> None:
    """Refuse (400) a header value with bytes that are not UTF-8: aiohttp keeps them as lone
    surrogates, which no later encode (an HMAC of the key, a log line, a forwarded header) survives.
    Control bytes never get here: aiohttp's parser refuses them (proxy/server/protocol.py)."""
    for name, value in request.headers.items():
        if value.isascii():
            continue
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidRequestError(f"Invalid {name} header: the value is not valid UTF-8",
                                      param=name, code="invalid_header") from None


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        check_headers(request)
        return await handler(request)
    except CtxProxyError as exc:
        return _failed(request, to_ctxproxy_error(exc) or exc)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _failed(request, _from_http_exception(request, exc))
    except (asyncio.CancelledError, ConnectionResetError):
        raise
    except Exception as exc:
        mapped = to_ctxproxy_error(exc)
        if mapped is None:
            request.app[appkeys.LOGGER].exception("unhandled_error", path=request.path)
            mapped = internal_error()
        return _failed(request, mapped)


def _failed(request: web.Request, error: CtxProxyError) -> web.StreamResponse:
    record = request.get(appkeys.RECORD)
    if record is not None:
        record.error_code = error.code
    if isinstance(error, StoreUnwritableError):
        note_unwritable(request.app, error, path=request.path)
    started: web.StreamResponse | None = request.get(PREPARED_RESPONSE)
    if started is not None and started.prepared:
        # Headers are gone already: writing a second HTTP response into the body would corrupt
        # the stream. Log it and end the one already started.
        request.app[appkeys.LOGGER].error("error_after_response_started", path=request.path,
                                          error_code=error.code)
        return started
    return error_response(error, anthropic=is_anthropic_route(request.path))


def note_unwritable(app: web.Application, error: StoreUnwritableError, **fields: Any) -> None:
    """A full or read-only store: counted, shown by /readyz, and one warning line (no traceback:
    the cause is known and the message says what to do)."""
    app[appkeys.METRICS].store_refused_write((error.code or "").removeprefix("store_"))
    app[appkeys.STORE_HEALTH].failed(error)
    app[appkeys.LOGGER].warning("store_unwritable", error_code=error.code, message=error.message,
                                **fields)


@web.middleware
async def observe_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    record = RequestRecord(method=request.method, path=request.path)
    request[appkeys.RECORD] = record
    started = time.perf_counter()
    status = CLIENT_CLOSED
    connections = request.app.get(appkeys.CONNECTIONS)
    if connections is not None:
        connections.head_received(request.protocol)
    try:
        response = await handler(request)
        status = response.status
        await send_unsent(request, response)
        return response
    finally:
        if connections is not None:
            connections.request_done(request.protocol)
        record.status = record.status or status
        await _finished(request)
        record.latency_ms = round((time.perf_counter() - started) * 1000, 3)
        _emit(request, record)


async def _finished(request: web.Request) -> None:
    """Wait for a streamed reply's shielded bookkeeping when the client left before it ended."""
    finishing = request.get(FINISHING)
    if finishing is not None and not finishing.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(finishing)


async def send_unsent(request: web.Request, response: web.StreamResponse) -> None:
    """Send a response the handler has not sent yet, so the client is answered before the log line
    and metrics are written (aiohttp then finds it sent). A client gone meanwhile is not an error,
    as in aiohttp's own sending."""
    if response.prepared or type(response) is not web.Response:  # a file, say, sends itself
        return
    closing = request.get(CLOSE_CONNECTION, False)
    if closing:
        response.force_close()
    try:
        await response.prepare(request)
        await response.write_eof()
    except ConnectionError:
        request[appkeys.RECORD].status = CLIENT_CLOSED
    if closing and request.protocol is not None:
        request.protocol.force_close()  # the unread rest of the body is never parsed as a request


def _emit(request: web.Request, record: RequestRecord) -> None:
    app = request.app
    resource = request.match_info.route.resource
    route = resource.canonical if resource is not None else "unmatched"
    app[appkeys.METRICS].observe_request(route, record.status)
    if route in RECALL_ROUTES and record.status == 200:
        app[appkeys.METRICS].recall_call(RECALL_ROUTES[route], "http")
    logger: Any = app[appkeys.LOGGER]
    log = logger.debug if record.path in QUIET_PATHS else logger.info
    log("request", **record.fields())
