"""Which summarizer a turn uses (the Engine's `summarizer_for`), with instances reused per endpoint.

`summarizer.model` unset: the request's own model and upstream (key: the entry's, else the
client's, in memory only). `local/extractive`: the deterministic local summarizer. Instances are
cached per endpoint (model, api_base, key hash); the engine keys its circuit breakers by the same
identity (`LiteLLMSummarizer.endpoint`), so an evicted and re-created instance keeps its count.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from compaction import (
    ChatTurn,
    ExtractiveSummarizer,
    LiteLLMSummarizer,
    Summarizer,
    SummarizerChoice,
    endpoint_identity,
)
from config.settings import LOCAL_EXTRACTIVE, Settings

MAX_CACHED = 1_024


class SummarizerChooser:
    """Callable `ChatTurn -> SummarizerChoice` for compaction.engine.Engine."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings.summarizer
        self._cache: OrderedDict[str, Summarizer] = OrderedDict()
        self._extractive = ExtractiveSummarizer()

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

    def _get(self, model: str, api_base: str | None, api_key: str | None) -> Summarizer:
        cache_key = endpoint_identity(model, api_base, api_key)  # never keeps keys as dict keys
        found = self._cache.get(cache_key)
        if found is None:
            s = self._settings
            found = LiteLLMSummarizer(model, api_base=api_base, api_key=api_key, timeout_s=s.timeout_s,
                                      temperature=s.temperature, extra=dict(s.extra))
            self._cache[cache_key] = found
            if len(self._cache) > MAX_CACHED:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(cache_key)
        return found
