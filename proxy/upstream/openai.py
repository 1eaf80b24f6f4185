"""Calling the provider: the OpenAI-compatible fast path over one shared aiohttp session.

`UpstreamRouter.for_params` picks the transport: providers speaking OpenAI's wire format with an
`api_base` go straight over HTTP (no re-serialisation of the reply); everything else goes through
litellm (proxy/upstream/litellm_routed.py). Every failure leaves here as a CtxProxyError.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from config.errors import CtxProxyError, UpstreamError, UpstreamHTTPError
from config.settings import OPENAI_API_BASE, LiteLLMParams
from proxy.error_mapping import CREDENTIALS_REJECTED, for_keyed_entry, provider_call
from proxy.wire.openai import compact_json
from proxy.wire.sse import DONE, SSEParser, event_data

# Response headers worth relaying to the client (rate-limit hints, request ids).
RELAYED_HEADER_PREFIXES = ("x-ratelimit-", "x-request-id", "openai-", "retry-after", "request-id",
                           "anthropic-ratelimit-")
# ...except the account behind the key: the operator's organisation/project when the key is theirs.
WITHHELD_HEADERS = frozenset({"openai-organization", "openai-project"})
MISSING_API_KEY = ("You didn't provide an API key. You need to provide your API key in an "
                   "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")
# How long a finished stream may take to deliver its terminating chunk before the connection is
# dropped instead of returned to the pool.
DRAIN_S = 1.0


@dataclass(frozen=True)
class UpstreamReply:
    """A complete non-streaming reply: the provider's bytes, untouched, and their parse."""

    status: int
    raw: bytes
    data: dict[str, Any]
    headers: dict[str, str]


class StreamingReply(Protocol):
    """An open streaming reply: status/headers known, events not yet read."""

    status: int
    headers: dict[str, str]

    def events(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


class Upstream(Protocol):
    """One transport to providers."""

    async def complete(self, params: LiteLLMParams, body: dict[str, Any],
                       api_key: str | None) -> UpstreamReply: ...

    async def open_stream(self, params: LiteLLMParams, body: dict[str, Any],
                          api_key: str | None) -> StreamingReply: ...


def uses_openai_wire(params: LiteLLMParams) -> bool:
    """True when the fast path applies (OpenAI wire format and a known base URL)."""
    return params.uses_openai_wire


class UpstreamRouter:
    """Holds both transports; litellm is imported only when a non-OpenAI provider is used."""

    def __init__(self, fast: Upstream, fallback: Upstream) -> None:
        self.fast = fast
        self.fallback = fallback

    def for_params(self, params: LiteLLMParams) -> Upstream:
        return self.fast if uses_openai_wire(params) else self.fallback


class OpenAIUpstream:
    """POST {api_base}/{path} with the shared session (`chat/completions`, or `responses`)."""

    def __init__(self, session: aiohttp.ClientSession, path: str = "chat/completions") -> None:
        self._session = session
        self._path = path

    async def complete(self, params: LiteLLMParams, body: dict[str, Any],
                       api_key: str | None) -> UpstreamReply:
        return await json_reply(await self._post(params, body, api_key), params)

    async def open_stream(self, params: LiteLLMParams, body: dict[str, Any],
                          api_key: str | None) -> StreamingReply:
        return await event_stream(await self._post(params, body, api_key), params)

    async def _post(self, params: LiteLLMParams, body: dict[str, Any],
                    api_key: str | None) -> aiohttp.ClientResponse:
        url = f"{(params.api_base or OPENAI_API_BASE).rstrip('/')}/{self._path}"
        with provider_call():
            return await self._session.post(url, data=compact_json(body),
                                            headers=request_headers(params, api_key),
                                            timeout=self._timeout(params, body.get("stream") is True))


    def _timeout(self, params: LiteLLMParams, stream: bool) -> aiohttp.ClientTimeout:
        """The session's timeouts, with the entry's `timeout` (`stream_timeout` when streaming) as
        the read timeout (handlers_chat.upstream_params fills both from server.upstream_timeout_s)."""
        base = self._session.timeout
        value = params.extra.get("stream_timeout" if stream else "timeout", params.extra.get("timeout"))
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            return base
        return aiohttp.ClientTimeout(total=base.total, connect=base.connect, sock_connect=base.sock_connect,
                                     sock_read=float(value))


def request_headers(params: LiteLLMParams, api_key: str | None) -> dict[str, str]:
    """Headers of a fast-path request: the key, the entry's `extra_headers`/`headers`, and its
    `organization` as OpenAI-Organization (the operator's setting wins over a forwarded one)."""
    headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    extra_headers = params.extra.get("extra_headers") or params.extra.get("headers")
    if isinstance(extra_headers, dict):
        headers.update({str(k): str(v) for k, v in extra_headers.items()})
    organization = params.extra.get("organization")
    if isinstance(organization, str) and organization:
        headers = {k: v for k, v in headers.items() if k.lower() != "openai-organization"}
        headers["OpenAI-Organization"] = organization
    return headers


class AiohttpStream:
    """Events of one streaming reply; `aclose` returns a finished stream's connection to the pool
    and drops an unfinished one (so the provider stops generating)."""

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self._resp = resp
        self.status = resp.status
        self.headers = relayed_headers(resp.headers)
        self.started = time.perf_counter()
        self._finished = False  # `[DONE]` seen or the body read to its end

    async def events(self) -> AsyncIterator[bytes]:
        parser = SSEParser()
        with provider_call():
            async for chunk in self._resp.content.iter_any():
                for event in parser.feed(chunk):
                    if event.endswith(DONE) and event_data(event)[1].strip() == DONE:
                        self._finished = True
                    yield event
        self._finished = True
        if parser.tail():
            yield parser.tail()

    async def aclose(self) -> None:
        if self._resp.closed:
            return
        if self._finished and await self._drained():
            self._resp.release()  # keep-alive: the next request reuses this connection
        else:
            self._resp.close()  # half-read: never back into the pool

    async def _drained(self) -> bool:
        """Read what follows `[DONE]` (normally just the chunked terminator), briefly."""
        try:
            async with asyncio.timeout(DRAIN_S):
                await self._resp.content.read()
        except (TimeoutError, aiohttp.ClientError):
            return False
        return self._resp.content.at_eof()


def upstream_http_error(status: int, raw: bytes, params: LiteLLMParams | None = None,
                        headers: Any = None) -> CtxProxyError:
    """A provider error: passed through unchanged when it is OpenAI-shaped JSON, else a 502; either
    way with the provider's Retry-After, rate-limit and request-id headers (`relayed_headers`).

    A 401/403 to the operator's configured key is the proxy's problem, not the client's: a 502
    (relaying it would blame a key the client never sent and echo a fragment of the operator's)."""
    relayed = relayed_headers(headers or {})
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict | str):
        return for_keyed_entry(params, UpstreamHTTPError(status, body, relayed))
    if params is not None and params.api_key and status in (401, 403):
        return UpstreamError(CREDENTIALS_REJECTED, code="upstream_credentials_rejected")
    snippet = raw[:200].decode("utf-8", "replace")
    error = UpstreamError(f"the upstream provider answered {status} without an error body: {snippet!r}")
    error.headers = relayed
    return error


def relayed_headers(headers: Any) -> dict[str, str]:
    """Provider response headers worth relaying (rate limits, request ids), never the account's."""
    return {k: v for k, v in headers.items()
            if k.lower().startswith(RELAYED_HEADER_PREFIXES) and k.lower() not in WITHHELD_HEADERS}


async def json_reply(resp: aiohttp.ClientResponse, params: LiteLLMParams) -> UpstreamReply:
    """A whole JSON reply (connection released); a provider error or a non-object body raises."""
    raw = await _read_all(resp)
    if resp.status >= 400:
        raise upstream_http_error(resp.status, raw, params, resp.headers)
    try:
        data = json.loads(raw)
    except ValueError:
        raise UpstreamError("the upstream provider answered with invalid JSON") from None
    if not isinstance(data, dict):
        raise UpstreamError("the upstream provider answered with a non-object JSON")
    return UpstreamReply(resp.status, raw, data, relayed_headers(resp.headers))


async def event_stream(resp: aiohttp.ClientResponse, params: LiteLLMParams) -> AiohttpStream:
    """An open event stream; a provider error is read whole (connection released) and raised."""
    if resp.status >= 400:
        raise upstream_http_error(resp.status, await _read_all(resp), params, resp.headers)
    return AiohttpStream(resp)


async def _read_all(resp: aiohttp.ClientResponse) -> bytes:
    """The whole body; the connection goes back to the pool either way."""
    try:
        with provider_call():
            return await resp.read()
    finally:
        resp.release()
