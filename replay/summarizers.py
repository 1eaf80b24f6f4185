"""The summarizer a replay runs: chosen by name, and wrapped to count its calls."""

from __future__ import annotations

from compaction import ExtractiveSummarizer, LiteLLMSummarizer, Summarizer, SummaryRequest
from config.settings import LOCAL_EXTRACTIVE, Settings


class CountingSummarizer:
    """Wraps a summarizer and counts its calls (the replay's "summarizer calls per turn")."""

    def __init__(self, inner: Summarizer) -> None:
        self.inner = inner
        self.calls = 0

    @property
    def name(self) -> str:
        return self.inner.name

    async def complete(self, request: SummaryRequest) -> str:
        self.calls += 1
        return await self.inner.complete(request)


def summarizer_named(name: str, settings: Settings) -> Summarizer:
    """`local/extractive`, a configured model_list name, or any litellm model (settings.summarizer
    supplies api_base/api_key for the latter)."""
    if name == LOCAL_EXTRACTIVE:
        return ExtractiveSummarizer()
    entry = settings.find_model(name)
    s = settings.summarizer
    if entry is not None:
        p = entry.resolved_params(name)
        return LiteLLMSummarizer(p.model, api_base=p.api_base, api_key=p.api_key,
                                 timeout_s=s.timeout_s, temperature=s.temperature, extra=dict(p.extra))
    return LiteLLMSummarizer(name, api_base=s.api_base, api_key=s.api_key, timeout_s=s.timeout_s,
                             temperature=s.temperature, extra=dict(s.extra))
