"""Providers without OpenAI's wire format (anthropic/, gemini/, bedrock/, ...) through litellm.

litellm translates the request and the reply; this module turns its response objects back into
OpenAI JSON (non-streaming) or SSE event blocks (streaming), so the handler treats both transports
alike. litellm is reached only through compaction.llm.get_litellm (offline cost map, no telemetry).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from config.errors import CtxProxyError, UpstreamError
from config.settings import LiteLLMParams
from proxy.error_mapping import to_ctxproxy_error
from proxy.upstream import StreamingReply, UpstreamReply

# Body keys the handler owns or litellm receives explicitly.
_OWN_KEYS = frozenset({"model", "messages", "stream"})


def _kwargs(params: LiteLLMParams, body: dict[str, Any], api_key: str | None,
            stream: bool) -> dict[str, Any]:
    kwargs: dict[str, Any] = {k: v for k, v in params.extra.items()}
    kwargs.update({k: v for k, v in body.items() if k not in _OWN_KEYS})
    kwargs.update(model=params.model, messages=body.get("messages", []), stream=stream)
    if params.api_base:
        kwargs["api_base"] = params.api_base
    if api_key:
        kwargs["api_key"] = api_key
    return kwargs


def _dump(obj: Any) -> dict[str, Any]:
    data = obj.model_dump(exclude_none=True) if hasattr(obj, "model_dump") else dict(obj)
    return data if isinstance(data, dict) else {}


def _mapped(exc: BaseException) -> CtxProxyError:
    return to_ctxproxy_error(exc) or UpstreamError(f"provider call failed: {type(exc).__name__}")


class LiteLLMUpstream:
    """The litellm transport (lazy: litellm is imported on first use)."""

    async def complete(self, params: LiteLLMParams, body: dict[str, Any],
                       api_key: str | None) -> UpstreamReply:
        from compaction.llm import get_litellm

        try:
            response = await get_litellm().acompletion(**_kwargs(params, body, api_key, False))
        except Exception as exc:
            raise _mapped(exc) from exc
        data = _dump(response)
        return UpstreamReply(200, json.dumps(data).encode(), data, {})

    async def open_stream(self, params: LiteLLMParams, body: dict[str, Any],
                          api_key: str | None) -> StreamingReply:
        from compaction.llm import get_litellm

        try:
            response = await get_litellm().acompletion(**_kwargs(params, body, api_key, True))
        except Exception as exc:
            raise _mapped(exc) from exc
        return _LiteLLMStream(response)


class _LiteLLMStream:
    """litellm's chunk iterator as OpenAI SSE event blocks, `[DONE]` included."""

    def __init__(self, response: Any) -> None:
        self._response = response
        self.status = 200
        self.headers: dict[str, str] = {}

    async def events(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response:
                yield b"data: " + json.dumps(_dump(chunk)).encode()
        except Exception as exc:
            raise _mapped(exc) from exc
        yield b"data: [DONE]"

    async def aclose(self) -> None:
        close = getattr(self._response, "aclose", None)
        if close is not None:
            try:
                await close()
            except Exception:  # closing a half-read provider stream is best effort
                return
