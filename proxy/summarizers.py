"""Which summarizer a turn uses (the Engine's `summarizer_for`), with instances reused per endpoint.

`summarizer.model` unset: the request's own model and upstream (key: the entry's, else the
client's, in memory only). `local/extractive`: the deterministic local summarizer. An endpoint that
speaks OpenAI's wire format (what the fast path forwards to) is called over HTTP by
`WireSummarizer`; any other provider through litellm (`LiteLLMSummarizer`), so a proxy whose routes
all speak OpenAI's format never imports litellm (~180 MiB). Instances are cached per endpoint
(model, api_base, key hash); the engine keys its circuit breakers by the same identity
(`endpoint`), so an evicted and re-created instance keeps its count.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

import aiohttp

from compaction import (
    ChatTurn,
    ExtractiveSummarizer,
    LiteLLMSummarizer,
    Summarizer,
    SummarizerChoice,
    SummaryRequest,
    endpoint_identity,
    redact,
)
from config.errors import CtxProxyError, SummarizerError
from config.settings import (
    FAST_PATH_BODY_PARAMS,
    FAST_PATH_PARAMS,
    LOCAL_EXTRACTIVE,
    OPENAI_API_BASE,
    LiteLLMParams,
    Settings,
    SummarizerSettings,
)
from proxy.error_mapping import provider_call
from proxy.upstream.openai import request_headers
from proxy.wire.openai import compact_json

MAX_CACHED = 1_024
# OpenAI's reasoning models take `max_completion_tokens` and only their default temperature.
REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")


class SummarizerChooser:
    """Callable `ChatTurn -> SummarizerChoice` for compaction.engine.Engine; `aclose` (the engine's
    `on_close`) closes the HTTP session its wire summarizers share."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings.summarizer
        self._cache: OrderedDict[str, Summarizer] = OrderedDict()
        self._extractive = ExtractiveSummarizer()
        self._http = HttpSession()

    def __call__(self, turn: ChatTurn) -> SummarizerChoice:
        s = self._settings
        if s.model == LOCAL_EXTRACTIVE:
            return SummarizerChoice(self._extractive, {"model": LOCAL_EXTRACTIVE})
        if s.model:
            # summarizer.api_key, else the request's credentials (the entry's key, else the client's):
            # a client key is never sent on when the operator configured one for the model.
            key = s.api_key or turn.upstream.api_key or turn.credentials.api_key
            model, api_base, api_key = s.model, s.api_base, key
        else:
            up = turn.upstream
            model, api_base, api_key = up.model, up.api_base, up.api_key or turn.credentials.api_key
        summarizer = self._get(model, api_base, api_key)
        provenance: dict[str, Any] = {"model": model, "api_base": api_base,
                                      "temperature": s.temperature}
        return SummarizerChoice(summarizer, provenance)

    async def aclose(self) -> None:
        await self._http.aclose()

    def _get(self, model: str, api_base: str | None, api_key: str | None) -> Summarizer:
        cache_key = endpoint_identity(model, api_base, api_key)  # never keeps keys as dict keys
        found = self._cache.get(cache_key)
        if found is None:
            found = self._cache[cache_key] = self._make(model, api_base, api_key)
            if len(self._cache) > MAX_CACHED:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(cache_key)
        return found

    def _make(self, model: str, api_base: str | None, api_key: str | None) -> Summarizer:
        s = self._settings
        params = LiteLLMParams(model, api_base, api_key, dict(s.extra))
        if speaks_openai_wire(params):
            return WireSummarizer(params, s, self._http)
        return LiteLLMSummarizer(model, api_base=api_base, api_key=api_key, timeout_s=s.timeout_s,
                                 temperature=s.temperature, extra=dict(s.extra))


def summaries_need_litellm(settings: Settings) -> bool:
    """Whether some turn's summarizer would be a LiteLLMSummarizer (`SummarizerChooser._make`'s
    choice, made for the configured summarizer, else for each model entry's upstream)."""
    s = settings.summarizer
    if s.model == LOCAL_EXTRACTIVE:
        return False
    endpoints = ([(s.model, s.api_base)] if s.model else
                 [(m.litellm_params.model, m.litellm_params.api_base) for m in settings.model_list])
    return any(not speaks_openai_wire(LiteLLMParams(model, api_base, None, dict(s.extra)))
               for model, api_base in endpoints)


def speaks_openai_wire(params: LiteLLMParams) -> bool:
    """The endpoint takes OpenAI's chat format at a known URL, and every `summarizer.extra` key is
    one the fast path applies (anything else is litellm's to interpret)."""
    return params.uses_openai_wire and set(params.extra) <= FAST_PATH_PARAMS


class HttpSession:
    """One aiohttp session, opened on first use on the loop that uses it (the engine's)."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    def get(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(trust_env=False, auto_decompress=True)
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class WireSummarizer:
    """POSTs the summary prompt to `{api_base}/chat/completions` (OpenAI's format) and returns the
    reply's text; every failure (transport, timeout, status, body) is a SummarizerError."""

    def __init__(self, params: LiteLLMParams, settings: SummarizerSettings, http: HttpSession) -> None:
        self._params = params
        self._settings = settings
        self._http = http
        self.model = params.model

    def __repr__(self) -> str:
        return f"WireSummarizer(model={self.model!r}, api_base={self._params.api_base!r})"

    @property
    def endpoint(self) -> str:
        """Stable identity of what this instance calls (see `endpoint_identity`)."""
        return endpoint_identity(self.model, self._params.api_base, self._params.api_key)

    @property
    def name(self) -> str:
        return self.model

    async def complete(self, request: SummaryRequest) -> str:
        url = f"{(self._params.api_base or OPENAI_API_BASE).rstrip('/')}/chat/completions"
        headers = request_headers(self._params, self._params.api_key)
        timeout = aiohttp.ClientTimeout(total=self._settings.timeout_s)
        try:
            with provider_call():  # transport failures mapped in the one place that maps them
                async with self._http.get().post(url, data=compact_json(self.body(request)),
                                                 headers=headers, timeout=timeout) as resp:
                    status, raw = resp.status, await resp.read()
        except CtxProxyError as exc:
            raise SummarizerError(f"{self.model}: {redact(exc.message)[:300]}") from exc
        if status != 200:
            snippet = redact(raw[:300].decode("utf-8", "replace"))
            raise SummarizerError(f"{self.model}: the provider answered {status}: {snippet}")
        return reply_text(raw, self.model)

    def body(self, request: SummaryRequest) -> dict[str, Any]:
        """The chat request: the prompt, a reply limit of twice the target (at least 256 tokens),
        the summarizer's temperature, then `summarizer.extra`'s body parameters over them."""
        model, limit = self._params.upstream_model, max(256, request.target_tokens * 2)
        body: dict[str, Any] = {"model": model, "messages": [
            {"role": "system", "content": request.system_prompt},
            {"role": "user", "content": request.user_prompt}]}
        if model.startswith(REASONING_PREFIXES):
            body["max_completion_tokens"] = limit
        else:
            body.update(max_tokens=limit, temperature=self._settings.temperature)
        body.update({k: v for k, v in self._params.extra.items() if k in FAST_PATH_BODY_PARAMS})
        return body


def reply_text(raw: bytes, model: str) -> str:
    """The assistant text of an OpenAI chat completion ('' when it has none); SummarizerError when
    the body is not one."""
    try:
        data = json.loads(raw)
        message = data["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise SummarizerError(f"{model}: the reply is not a chat completion: "
                              f"{redact(raw[:200].decode('utf-8', 'replace'))}") from exc
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else ""
