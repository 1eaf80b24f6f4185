"""Reading a request body safely: read deadlines, Content-Encoding, size limit, nesting depth, lone
surrogates.

Every way a body can be bad ends here as a 400, 408 or 413 in the route's error shape, so no handler
waits on a trickling client or sees a value that would later crash the store (a lone surrogate
cannot be UTF-8 encoded) or a recursive walk (JSON nested deeper than any real request).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import orjson
from aiohttp import web

from config.errors import InvalidRequestError, PayloadTooLargeError, RequestTimeoutError
from config.settings import ServerSettings
from proxy import appkeys
from proxy.error_mapping import to_ctxproxy_error
from proxy.server.resent_body import ResentBodies

MAX_JSON_DEPTH = 128  # objects/arrays inside each other; a 30-level tool schema is 64 of them
# A body this large is parsed in a worker thread: its checks (depth, numbers, surrogates) walk every
# value in Python, 0.25 s for a 13 MB imported history, which the HTTP loop would otherwise wait out.
OFF_LOOP_BODY_BYTES = 1024 * 1024
# A `\uD800`-`\uDFFF` escape: the only way a parsed JSON string can hold a surrogate code point.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_HUGE = 2.0**63  # orjson reads an integer beyond 64 bits as a float at least this large
# Set when the body could not be read to its end: the answer closes the connection.
CLOSE_CONNECTION = web.RequestKey("close_connection", bool)
RAW_BODY = web.RequestKey("raw_body", bytes)  # read once, by read_body


async def read_json_object(request: web.Request, *, resend_scope: str | None = None,
                           history: str = "messages") -> dict[str, Any]:
    """The request body as a JSON object; 413 over the limit, 400 when malformed. `resend_scope`
    (the tenant): the body may resend one held for that scope, and only what it adds to its
    `history` array (`messages`, or the Responses API's `input`) is parsed (proxy/server/resent_body.py)."""
    raw = await read_body(request)
    held = request.app[appkeys.RESENT_INPUTS if history == "input" else appkeys.RESENT_BODIES]
    if len(raw) < OFF_LOOP_BODY_BYTES:
        body = _parsed(request, raw, resend_scope, held)
    else:  # orjson holds the GIL (50 ms for 13 MB); the checks after it are Python: the loop interleaves
        body = await asyncio.to_thread(_parsed, request, raw, resend_scope, held)
    request[appkeys.PARSED_BODY] = body
    return body


async def read_body(request: web.Request) -> bytes:
    """The raw (decoded) body, the one way every route reads one: 413 over the limit, 400 when it
    does not decode (a `Content-Encoding` it does not have) or ends early, 408 when it arrives too
    slowly. After a 400 or 408 the connection is closed: its framing can no longer be trusted."""
    if RAW_BODY in request:
        return request[RAW_BODY]
    server = request.app[appkeys.SETTINGS].server
    if request.content_length is not None and request.content_length > server.max_body_bytes:
        raise PayloadTooLargeError(f"request body of {request.content_length} bytes exceeds the "
                                   f"limit of {server.max_body_bytes} bytes")
    try:
        raw = request[RAW_BODY] = await _read_in_time(request, server)
    except Exception as exc:
        mapped = to_ctxproxy_error(exc)
        if mapped is None:
            raise
        request[CLOSE_CONNECTION] = True
        raise mapped from None
    return raw


async def _read_in_time(request: web.Request, server: ServerSettings) -> bytes:
    """The body, each part within body_timeout_s and the whole within body_timeout_s plus its size
    at min_body_bytes_per_s: a client trickling bytes, or sending less than its Content-Length,
    gets a 408 instead of holding the request open."""
    loop = asyncio.get_running_loop()
    started, size = loop.time(), 0
    parts: list[bytes] = []
    while True:
        expected = max(size, request.content_length or 0)
        deadline = started + server.body_timeout_s + expected / server.min_body_bytes_per_s
        wait = min(server.body_timeout_s, deadline - loop.time())
        try:
            async with asyncio.timeout(max(wait, 0.0)):
                chunk = await request.content.readany()
        except TimeoutError:
            raise RequestTimeoutError(f"the request body did not arrive in time ({size} bytes in "
                                      f"{loop.time() - started:.1f} s)") from None
        if not chunk:
            return b"".join(parts)
        size += len(chunk)
        if size > server.max_body_bytes:
            raise PayloadTooLargeError(f"request body exceeds the limit of {server.max_body_bytes} bytes")
        parts.append(chunk)


def _parsed(request: web.Request, raw: bytes, resend_scope: str | None, held: ResentBodies) -> dict[str, Any]:
    """`raw` parsed past what a held body shares with it, else in full (and then held)."""
    if resend_scope is None:
        return parse_json_object(raw)
    body = held.parse(resend_scope, raw, _plain)
    if body is not None:
        request.app[appkeys.METRICS].resent_body_parses.inc()
        return body
    body = parse_json_object(raw)
    held.keep(resend_scope, raw, body)
    return body


def parse_json_object(raw: bytes, *, fast_path: bool = True) -> dict[str, Any]:
    """Decode and check a body: a JSON object, nested at most MAX_JSON_DEPTH, valid Unicode only.
    `fast_path=False`: json's parse alone (what the orjson path is tested against)."""
    fast = _read_fast(raw) if fast_path else None
    body: Any = fast if fast is not None else _read(raw)
    if not isinstance(body, dict):
        raise InvalidRequestError("the request body must be a JSON object")
    deep, huge = _walk(body, MAX_JSON_DEPTH)
    if deep:
        raise _too_deep()
    if fast is not None and not huge:
        return body  # orjson refuses lone surrogates: nothing to look for
    # An integer beyond 64 bits, which orjson read as a float: json reads it exactly.
    exact: dict[str, Any] = _read(raw) if fast is not None else body
    if _SURROGATE_ESCAPE.search(raw):
        path = _surrogate_path(exact, "")
        if path is not None:
            raise InvalidRequestError(
                f"Invalid {path or 'body'}: the string holds a lone UTF-16 surrogate (not valid "
                "Unicode)", param=path or None, code="invalid_unicode")
    return exact


def _read_fast(raw: bytes) -> Any:
    """orjson's parse, or None where it refuses the body (json then decides, errors included).

    orjson refuses everything json refuses, and more: lone surrogates, NaN and Infinity, numbers
    beyond a double, a byte order mark, UTF-16/32 (tests/proxy/server/test_body_parse.py). The one value it
    reads differently is an integer outside 64 bits, read as a float: `_walk` finds such a float."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def _read(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequestError(f"We could not parse the JSON body of your request: {exc}",
                                  code="invalid_json") from None
    except RecursionError:
        raise _too_deep() from None


def _plain(body: dict[str, Any]) -> bool:
    """Within MAX_JSON_DEPTH and without an integer orjson could not read exactly."""
    return _walk(body, MAX_JSON_DEPTH) == (False, False)


def _too_deep() -> InvalidRequestError:
    return InvalidRequestError(f"the JSON body is nested more than {MAX_JSON_DEPTH} levels deep",
                               code="invalid_json")


def _walk(body: dict[str, Any], limit: int) -> tuple[bool, bool]:
    """(containers nest deeper than `limit`, a float of magnitude 2**63 or more is in it), in one
    iterative pass (no recursion on hostile input)."""
    huge = False
    stack: list[tuple[Any, int]] = [(body, 1)]
    while stack:
        node, depth = stack.pop()
        for child in node.values() if node.__class__ is dict else node:
            kind = child.__class__
            if kind is str:  # most values of a chat body: skipped at once
                continue
            if kind is dict or kind is list:
                if depth >= limit:
                    return True, huge
                stack.append((child, depth + 1))
            elif kind is float and abs(child) >= _HUGE:
                huge = True
    return False, huge


def _surrogate_path(value: object, path: str) -> str | None:
    """The JSON path of the first string (or key) holding a lone surrogate, None when all are valid."""
    if isinstance(value, str):
        return path if not _is_valid_unicode(value) else None
    if isinstance(value, dict):
        for key, child in value.items():
            inner = f"{path}.{key}" if path else str(key)
            if not _is_valid_unicode(key):
                return path or "body"
            found = _surrogate_path(child, inner)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found = _surrogate_path(child, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def _is_valid_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
