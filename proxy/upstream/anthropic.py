"""Anthropic's Messages API over the shared aiohttp session: `anthropic/...` entries, natively.

`api_base` is spelled as LiteLLM spells it, without `/v1` (https://api.anthropic.com by default).
The key goes as `x-api-key` (the entry's own, else the client's); the client's `anthropic-version`,
`anthropic-beta` and User-Agent go along. Every failure leaves as a CtxProxyError.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp

from config.settings import LiteLLMParams
from proxy.error_mapping import provider_call
from proxy.upstream.openai import AiohttpStream, UpstreamReply, event_stream, json_reply
from proxy.wire.openai import compact_json

ANTHROPIC_API_BASE = "https://api.anthropic.com"
DEFAULT_VERSION = "2023-06-01"
CLIENT_HEADERS = frozenset({"anthropic-version", "anthropic-beta", "user-agent"})


def messages_url(params: LiteLLMParams, path: str) -> str:
    """`{api_base}/v1/{path}`; a base already ending in /v1 is accepted too."""
    base = (params.api_base or ANTHROPIC_API_BASE).rstrip("/").removesuffix("/v1")
    return f"{base}/v1/{path}"


def request_headers(client: Mapping[str, str], api_key: str | None) -> dict[str, str]:
    """The key, the client's Anthropic headers (a default version when it sent none)."""
    headers = {k: v for k, v in client.items() if k.lower() in CLIENT_HEADERS}
    if not any(k.lower() == "anthropic-version" for k in headers):
        headers["anthropic-version"] = DEFAULT_VERSION
    headers.update({"Content-Type": "application/json", "Accept-Encoding": "identity"})
    if api_key:
        headers["x-api-key"] = api_key
    return headers


class AnthropicUpstream:
    """POST {api_base}/v1/{path} (`messages` or `messages/count_tokens`)."""

    def __init__(self, session: aiohttp.ClientSession, client_headers: Mapping[str, str],
                 path: str = "messages") -> None:
        self._session = session
        self._client_headers = client_headers
        self._path = path

    async def complete(self, params: LiteLLMParams, body: dict[str, Any],
                       api_key: str | None) -> UpstreamReply:
        return await json_reply(await self._post(params, body, api_key), params)

    async def open_stream(self, params: LiteLLMParams, body: dict[str, Any],
                          api_key: str | None) -> AiohttpStream:
        return await event_stream(await self._post(params, body, api_key), params)

    async def _post(self, params: LiteLLMParams, body: dict[str, Any],
                    api_key: str | None) -> aiohttp.ClientResponse:
        with provider_call(params):
            return await self._session.post(messages_url(params, self._path), data=compact_json(body),
                                            headers=request_headers(self._client_headers, api_key))
