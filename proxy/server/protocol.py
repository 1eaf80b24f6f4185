"""The HTTP server under the app: what aiohttp answers itself (a request its parser rejects, a
failure past every middleware) in OpenAI's error shape (Anthropic's on its routes), and `serve`,
which runs the app with it and with its connections guarded (proxy/server/connections.py).

aiohttp answers a malformed request (a control byte or invalid byte in a header value, a bad
request line, a line too long) with a plain-text 400 from `RequestHandler.handle_error` before any
middleware runs, and has no parameter to change that (aio-libs/aiohttp#3287). The supported pieces
are `web.RequestHandler.handle_error` (a public method) and `web.AppRunner` with `web.TCPSite`
(what `web.run_app` does inside, minus the hook); the one glue is a class swap of the objects the
runner builds (`openai_errors`): no private attribute is read and none of aiohttp's construction
logic is copied.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiohttp import web

from proxy import appkeys
from proxy.error_mapping import http_failure
from proxy.server.connections import ConnectionGuard, head_path
from proxy.server.warmup import freeze_after_warmup
from proxy.wire.anthropic_errors import anthropic_error_body, is_anthropic_route

KEEPALIVE_S = 75.0  # web.run_app's defaults
LINGERING_S = 10.0  # aiohttp's: an unread body is read and dropped this long before closing
SHUTDOWN_TIMEOUT_S = 60.0


class OpenAIErrorHandler(web.RequestHandler):
    """aiohttp's connection protocol, answering its own errors as `{"error": {...}}` JSON."""

    __slots__ = ()

    def handle_error(self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        """aiohttp's logging and checks (it raises when a response already started), our body."""
        super().handle_error(request, status, exc, message)
        error = http_failure(status, exc)
        path = head_path(self.transport) or request.path  # the parser's errors have no request path
        anthropic = is_anthropic_route(path.split("?")[0])
        body = anthropic_error_body(error, status) if anthropic else error.to_body()
        resp = web.json_response(body, status=status)
        resp.force_close()  # as aiohttp does: the connection's framing cannot be trusted any more
        return resp


class OpenAIErrorServer(web.Server):
    """The app's low-level server, making OpenAIErrorHandler protocols (one per connection), each
    behind its guard when one is set (proxy/server/connections.py)."""

    guard: ConnectionGuard | None = None

    def __call__(self) -> Any:
        handler = super().__call__()
        handler.__class__ = OpenAIErrorHandler  # same slots, only handle_error differs
        return handler if self.guard is None else self.guard.wrap(handler)


def openai_errors(runner: web.BaseRunner, guard: ConnectionGuard | None = None) -> None:
    """Make a set-up runner's server answer its own errors in OpenAI's shape (before any site starts:
    connections accepted earlier keep aiohttp's handler), its connections held by `guard`."""
    if runner.server is None:
        raise RuntimeError("openai_errors needs a runner after setup()")
    runner.server.__class__ = OpenAIErrorServer
    assert isinstance(runner.server, OpenAIErrorServer)
    runner.server.guard = guard


async def start(app: web.Application, host: str, port: int, *, reuse_port: bool = False) -> web.AppRunner:
    """`app` set up and listening on host:port, parser errors in OpenAI's shape (`runner.cleanup()`
    stops it); signals (SIGINT/SIGTERM) raise GracefulExit, as under `web.run_app`."""
    server = app[appkeys.SETTINGS].server
    guard = app[appkeys.CONNECTIONS] = ConnectionGuard(server.header_timeout_s, server.max_connections)
    runner = web.AppRunner(app, handle_signals=True, access_log=None, handler_cancellation=True,
                           keepalive_timeout=KEEPALIVE_S, shutdown_timeout=SHUTDOWN_TIMEOUT_S,
                           lingering_time=min(LINGERING_S, server.body_timeout_s))
    await runner.setup()
    try:
        openai_errors(runner, guard)
        await web.TCPSite(runner, host, port, reuse_port=reuse_port or None).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner


async def _serve(app: web.Application, host: str, port: int, reuse_port: bool) -> None:
    runner = await start(app, host, port, reuse_port=reuse_port)
    freezing = asyncio.create_task(freeze_after_warmup(app))
    try:
        await asyncio.Event().wait()  # until SIGINT/SIGTERM raise GracefulExit
    finally:
        freezing.cancel()
        await runner.cleanup()


def serve(app: web.Application, host: str, port: int, *, reuse_port: bool = False) -> None:
    """Serve `app` until SIGINT/SIGTERM, like `web.run_app`, with OpenAI-shaped parser errors."""
    with contextlib.suppress(web.GracefulExit, KeyboardInterrupt):
        asyncio.run(_serve(app, host, port, reuse_port))
