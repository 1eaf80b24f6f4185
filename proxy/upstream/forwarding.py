"""Transparent forwarding of any other /v1/ request: bytes streamed both ways, headers intact.

Only hop-by-hop headers, the client's credentials (replaced by the entry's key when it has one) and
ctxproxy's own headers are touched; the body is never parsed here. Every provider failure leaves as
a CtxProxyError through `provider_call`.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Callable, Mapping
from dataclasses import dataclass

import aiohttp
from aiohttp import web
from yarl import URL

from config.settings import OPENAI_API_BASE, LiteLLMParams
from proxy.error_mapping import provider_call
from proxy.upstream.openai import WITHHELD_HEADERS
from proxy.upstream.paths import confined_url

# Never forwarded in either direction (RFC 9110 7.6.1), plus what the hop recomputes.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                        "trailer", "trailers", "transfer-encoding", "upgrade", "host", "content-encoding"})
# Client headers that are ctxproxy's own or its session's, never the provider's business.
CLIENT_ONLY = frozenset({"authorization", "x-api-key", "cookie", "x-conversation-id", "accept-encoding"})
# Provider headers that must not cross to the client (cookies belong to the proxy's session).
UPSTREAM_ONLY = frozenset({"set-cookie", "content-length"})

Body = bytes | AsyncIterable[bytes] | None


@dataclass(frozen=True)
class Forwarded:
    """One request as it leaves for the provider."""

    method: str
    url: URL
    headers: dict[str, str]
    body: Body


def upstream_url(params: LiteLLMParams, tail: str, raw_query: str, shown: str) -> URL:
    """`{api_base}/{tail}?{raw_query}` (api_base already ends in /v1, as in every OpenAI SDK), `tail`
    still encoded and confined under the base path (proxy/upstream/paths.py; `shown` names the
    client's request in the 400)."""
    return confined_url(params.api_base or OPENAI_API_BASE, tail, raw_query, shown)


def outgoing_headers(client: Mapping[str, str], params: LiteLLMParams, *, body_rewritten: bool,
                     client_key: str | None) -> dict[str, str]:
    """The client's headers minus hop-by-hop and its credentials; the entry's key or the client's."""
    drop = HOP_BY_HOP | CLIENT_ONLY | ({"content-length"} if body_rewritten else frozenset())
    if params.api_key:
        drop = drop | WITHHELD_HEADERS  # the operator's account: not the client's to choose
    headers = {k: v for k, v in client.items() if k.lower() not in drop}
    headers["Accept-Encoding"] = "identity"  # bytes relayed as the provider sends them
    key = params.api_key or client_key
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def relayed_response_headers(upstream: Mapping[str, str], *, operator_key: bool) -> dict[str, str]:
    """Every provider header except hop-by-hop ones, cookies and (with the operator's key) its account."""
    drop = HOP_BY_HOP | UPSTREAM_ONLY | (WITHHELD_HEADERS if operator_key else frozenset())
    return {k: v for k, v in upstream.items() if k.lower() not in drop}


async def relay(session: aiohttp.ClientSession, out: Forwarded, request: web.Request, *,
                operator_key: bool, started: Callable[[web.StreamResponse], None],
                tap: Callable[[bytes], None] | None = None) -> tuple[web.StreamResponse, int]:
    """Send `out`, stream the provider's answer (any status) to the client; (response, status).
    `started` is told once the response headers are sent (later errors cannot answer anew);
    `tap` sees each chunk relayed."""
    with provider_call():
        async with session.request(out.method, out.url, data=out.body, headers=out.headers,
                                   allow_redirects=False) as resp:
            response = web.StreamResponse(status=resp.status, reason=resp.reason, headers=
                                          relayed_response_headers(resp.headers, operator_key=operator_key))
            await response.prepare(request)
            started(response)
            async for chunk in resp.content.iter_any():
                if tap is not None:
                    tap(chunk)
                await response.write(chunk)
    await response.write_eof()
    return response, resp.status


async def relay_whole(session: aiohttp.ClientSession, out: Forwarded, *, operator_key: bool,
                      rewrite: Callable[[int, bytes], Awaitable[bytes]]) -> tuple[web.Response, int]:
    """Send `out` and read the provider's whole answer, which `rewrite(status, body)` may change
    before the client gets it (small JSON answers only: what a creation returns, a list)."""
    with provider_call():
        async with session.request(out.method, out.url, data=out.body, headers=out.headers,
                                   allow_redirects=False) as resp:
            raw = await resp.read()
            headers = relayed_response_headers(resp.headers, operator_key=operator_key)
    body = await rewrite(resp.status, raw)
    return web.Response(status=resp.status, reason=resp.reason, body=body, headers=headers), resp.status
