"""Client connections held to a deadline and a bound, as HTTP servers do (nginx's
`client_header_timeout` and `worker_connections`, Envoy's `request_headers_timeout`).

aiohttp has neither: a client that connects and sends nothing, or sends its head a byte at a time,
holds its connection forever. `GuardedConnection` wraps aiohttp's per-connection protocol (it only
forwards the asyncio Protocol calls, no private attribute is read): a request head must arrive within
header_timeout_s of the connection opening (or of the next request's first byte), else the client
gets a 408 and the connection is closed; past max_connections a new connection gets a 503 and is
closed. Bodies have their own deadline where they are read (proxy/server/body.py).
"""

from __future__ import annotations

import asyncio
import json
import weakref
from typing import Any

from aiohttp import web

from config.errors import CtxProxyError, NotReadyError, RequestTimeoutError
from proxy.wire.anthropic_errors import anthropic_error_body, is_anthropic_route

REASONS = {408: "Request Timeout", 503: "Service Unavailable"}
LINGER_S = 1.0  # after answering and ending a refused connection, until it is closed
HEAD_START_BYTES = 1_024
# The first bytes of the request head a connection is receiving, for errors answered before any
# request exists (aiohttp's parser errors, a head too slow): Anthropic's shape on its routes.
HEAD_STARTS: weakref.WeakKeyDictionary[asyncio.BaseTransport, bytes] = weakref.WeakKeyDictionary()


def raw_error(error: CtxProxyError, status: int, path: str | None, **headers: str) -> bytes:
    """A complete HTTP/1.1 error response (JSON in the route's shape) for a connection then closed."""
    body = (anthropic_error_body(error, status) if path and is_anthropic_route(path.split("?")[0])
            else error.to_body())
    data = json.dumps(body).encode()
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}", "Content-Type: application/json",
             f"Content-Length: {len(data)}", "Connection: close",
             *(f"{k}: {v}" for k, v in headers.items())]
    return "\r\n".join(lines).encode() + b"\r\n\r\n" + data


def head_path(transport: asyncio.BaseTransport | None) -> str | None:
    """The request target of the head `transport` is receiving, if its request line is there."""
    start = HEAD_STARTS.get(transport) if transport is not None else None
    parts = (start or b"").split(b"\r\n", 1)[0].split(b" ")
    return parts[1].decode("latin-1") if len(parts) >= 2 and parts[1] else None


class ConnectionGuard:
    """One server's open connections: bounded, each request head due within header_timeout_s."""

    def __init__(self, header_timeout_s: float, max_connections: int) -> None:
        self.header_timeout_s = header_timeout_s
        self.max_connections = max_connections
        self.open: dict[web.RequestHandler, GuardedConnection] = {}

    def wrap(self, handler: web.RequestHandler) -> GuardedConnection:
        """The protocol the event loop sees for one new connection."""
        return GuardedConnection(self, handler)

    def head_received(self, handler: Any) -> None:
        """A request's head was parsed (its handler started): its deadline no longer applies."""
        connection = self.open.get(handler)
        if connection is not None:
            connection.in_request(True)

    def request_done(self, handler: Any) -> None:
        """The request was answered: the next one's head is due from its first byte."""
        connection = self.open.get(handler)
        if connection is not None:
            connection.in_request(False)


class GuardedConnection(asyncio.Protocol):
    """aiohttp's protocol for one connection, with the head deadline and the connection bound."""

    def __init__(self, guard: ConnectionGuard, handler: web.RequestHandler) -> None:
        self.guard, self.handler = guard, handler
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.busy = self.admitted = self.closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Refuse (503) past max_connections; else hand over to aiohttp and start the head clock."""
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if len(self.guard.open) >= self.guard.max_connections:
            error = NotReadyError("ctxproxy has too many open connections; retry shortly",
                                  code="too_many_connections")
            self._close_with(raw_error(error, 503, None, **{"Retry-After": "1"}))
            return
        self.guard.open[self.handler] = self
        self.admitted = True
        self.handler.connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        """Bytes for aiohttp's parser; the first of a new request starts its head clock."""
        if self.closing:
            return
        if not self.busy and self.transport is not None:
            start = HEAD_STARTS.get(self.transport, b"")
            if not start and self.timer is None:
                self._arm()
            if len(start) < HEAD_START_BYTES:
                HEAD_STARTS[self.transport] = start + data[:HEAD_START_BYTES - len(start)]
        self.handler.data_received(data)

    def eof_received(self) -> bool | None:
        if not self.closing:
            self.handler.eof_received()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self.admitted:
            self.guard.open.pop(self.handler, None)
            self.handler.connection_lost(exc)

    def pause_writing(self) -> None:
        self.handler.pause_writing()

    def resume_writing(self) -> None:
        self.handler.resume_writing()

    def in_request(self, busy: bool) -> None:
        """Between a head parsed and its answer no head clock runs; after it, a new head is due."""
        self.busy = busy
        self._disarm()
        if self.transport is not None:
            HEAD_STARTS.pop(self.transport, None)

    def _arm(self) -> None:
        self._disarm()
        self.timer = asyncio.get_running_loop().call_later(self.guard.header_timeout_s, self._expired)

    def _disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expired(self) -> None:
        """The head did not arrive in time: 408 and the connection closed."""
        self.timer = None
        if self.busy or self.transport is None or self.transport.is_closing():
            return
        error = RequestTimeoutError("the request head did not arrive in time "
                                    f"({self.guard.header_timeout_s:g} s)")
        self._close_with(raw_error(error, 408, head_path(self.transport)))

    def _close_with(self, answer: bytes) -> None:
        """Send `answer`, end the sending side, and close a moment later: closing at once with the
        client's bytes unread would reset the connection and lose the answer (a lingering close)."""
        assert self.transport is not None
        self.closing = True  # what the client sends from now on is dropped, never parsed
        transport = self.transport
        transport.write(answer)
        if transport.can_write_eof():
            transport.write_eof()
        asyncio.get_running_loop().call_later(LINGER_S, transport.close)
