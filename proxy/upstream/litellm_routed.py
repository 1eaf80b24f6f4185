"""Providers without OpenAI's wire format (anthropic/, gemini/, bedrock/, ...) through litellm.

litellm translates the request and the reply; this module turns its response objects back into
OpenAI JSON (non-streaming) or SSE event blocks (streaming), so the handler treats both transports
alike. litellm is reached only through compaction.llm.get_litellm (offline cost map, no telemetry).

Security: litellm's keyword arguments also choose *where* a call goes and *with which credentials*
(`base_url`, `api_base`, `extra_headers`, `custom_llm_provider`, `aws_*`, `mock_response`, ...), so
only OpenAI chat parameters are taken from the client's body; the operator's `extra` and the
endpoint/key are applied after them. Without any key litellm would read the proxy's environment
(`ANTHROPIC_API_KEY`, ...) on the caller's behalf, so a keyless call is refused with 401.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from config.errors import AuthenticationError
from config.settings import LiteLLMParams
from proxy.error_mapping import provider_call
from proxy.upstream.openai import MISSING_API_KEY, StreamingReply, UpstreamReply

# OpenAI chat parameters a client may set; every other body key is dropped (see module doc).
# `metadata` is left out on purpose: litellm reads it as its own logging/routing metadata.
CLIENT_PARAMS = frozenset({
    "temperature", "top_p", "n", "stop", "max_tokens", "max_completion_tokens", "presence_penalty",
    "frequency_penalty", "logit_bias", "user", "tools", "tool_choice", "parallel_tool_calls",
    "response_format", "seed", "logprobs", "top_logprobs", "stream_options", "reasoning_effort",
    "modalities", "audio", "prediction", "web_search_options", "functions", "function_call",
})
# Providers that need no key, and `extra` keys meaning the operator configured credentials itself.
KEYLESS_PROVIDERS = frozenset({"ollama", "ollama_chat", "lm_studio", "llamafile"})
CREDENTIAL_EXTRA_PREFIXES = ("aws_", "vertex_", "azure_ad_token")


def _require_key(params: LiteLLMParams, api_key: str | None) -> None:
    """401 when no key reaches litellm, which would otherwise use the proxy's environment keys."""
    if api_key or params.provider in KEYLESS_PROVIDERS:
        return
    if any(str(k).startswith(CREDENTIAL_EXTRA_PREFIXES) for k in params.extra):
        return
    raise AuthenticationError(MISSING_API_KEY, code="missing_api_key")


def _kwargs(params: LiteLLMParams, body: dict[str, Any], api_key: str | None,
            stream: bool) -> dict[str, Any]:
    """Client's OpenAI parameters, then the operator's `extra`, then model, endpoint and key."""
    _require_key(params, api_key)
    kwargs: dict[str, Any] = {k: v for k, v in body.items() if k in CLIENT_PARAMS}
    kwargs.update(params.extra)
    kwargs.update(model=params.model, messages=body.get("messages", []), stream=stream)
    if params.api_base:
        kwargs["api_base"] = params.api_base
    if api_key:
        kwargs["api_key"] = api_key
    return kwargs


def _dump(obj: Any) -> dict[str, Any]:
    data = obj.model_dump(exclude_none=True) if hasattr(obj, "model_dump") else dict(obj)
    return data if isinstance(data, dict) else {}


class LiteLLMUpstream:
    """The litellm transport (lazy: litellm is imported on first use).

    Timeouts come in `params.extra` (`timeout`, `stream_timeout`): the chat handler fills them from
    server.upstream_timeout_s unless the model entry sets its own (handlers_chat.upstream_params).
    """

    async def complete(self, params: LiteLLMParams, body: dict[str, Any],
                       api_key: str | None) -> UpstreamReply:
        from compaction import get_litellm_async

        with provider_call(params):
            litellm = await get_litellm_async()
            response = await litellm.acompletion(**_kwargs(params, body, api_key, False))
        data = _dump(response)
        return UpstreamReply(200, json.dumps(data).encode(), data, {})

    async def open_stream(self, params: LiteLLMParams, body: dict[str, Any],
                          api_key: str | None) -> StreamingReply:
        from compaction import get_litellm_async

        with provider_call(params):
            litellm = await get_litellm_async()
            response = await litellm.acompletion(**_kwargs(params, body, api_key, True))
        return _LiteLLMStream(response)


class _LiteLLMStream:
    """litellm's chunk iterator as OpenAI SSE event blocks, `[DONE]` included."""

    def __init__(self, response: Any) -> None:
        self._response = response
        self.status = 200
        self.headers: dict[str, str] = {}

    async def events(self) -> AsyncIterator[bytes]:
        with provider_call():
            async for chunk in self._response:
                yield b"data: " + json.dumps(_dump(chunk)).encode()
        yield b"data: [DONE]"

    async def aclose(self) -> None:
        close = getattr(self._response, "aclose", None)
        if close is not None:
            try:
                await close()
            except Exception:  # closing a half-read provider stream is best effort
                return
