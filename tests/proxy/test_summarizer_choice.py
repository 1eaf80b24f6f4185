"""Which summarizer a turn gets: the key order (docs/configuration.md: summarizer.api_key, else the
request's credentials: the model entry's key, else the client's), and the transport: an endpoint
speaking OpenAI's wire format is called over HTTP (WireSummarizer), any other through litellm."""

from __future__ import annotations

from typing import Any

import pytest

from compaction.summarize.summarizers import LiteLLMSummarizer
from compaction.types import ChatTurn, Credentials, Summarizer
from config.settings import CompactionSettings, LiteLLMParams, ModelEntry, Settings, SummarizerSettings
from proxy.summarizers import SummarizerChooser, WireSummarizer

CLIENT_KEY = "sk-client-0001"
ENTRY_KEY = "sk-entry-0002"
SUMMARIZER_KEY = "sk-summarizer-0003"


def chosen(summarizer: SummarizerSettings, entry: LiteLLMParams | None = None) -> Summarizer:
    params = entry or LiteLLMParams("openai/gpt-4o", "http://127.0.0.1:9/v1", ENTRY_KEY)
    settings = Settings(model_list=(ModelEntry("m", params),), summarizer=summarizer)
    turn = ChatTurn(tenant_id="t", model="m", upstream=params, settings=CompactionSettings(),
                    context_window=8192, messages=(), credentials=Credentials(CLIENT_KEY))
    return SummarizerChooser(settings)(turn).summarizer


def key_of(summarizer: Summarizer) -> Any:
    if isinstance(summarizer, WireSummarizer):
        return summarizer._params.api_key
    assert isinstance(summarizer, LiteLLMSummarizer)
    return summarizer._api_key


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "anthropic/claude-haiku-4-5"])
@pytest.mark.parametrize(("summarizer_key", "entry_key", "expected"), [
    (SUMMARIZER_KEY, ENTRY_KEY, SUMMARIZER_KEY),
    (None, ENTRY_KEY, ENTRY_KEY),  # the client's key never leaves when the operator set one
    (None, None, CLIENT_KEY),
])
def test_configured_summarizer_key_order(model: str, summarizer_key: str | None, entry_key: str | None,
                                         expected: str) -> None:
    entry = LiteLLMParams("openai/gpt-4o", "http://127.0.0.1:9/v1", entry_key)
    summarizer = chosen(SummarizerSettings(model=model, api_base="http://127.0.0.1:9/sum",
                                           api_key=summarizer_key), entry)
    assert key_of(summarizer) == expected


@pytest.mark.parametrize(("summarizer", "entry", "wire"), [
    (SummarizerSettings(), None, True),  # the request's own OpenAI-compatible upstream
    (SummarizerSettings(model="gpt-4o-mini"), None, True),  # no prefix: OpenAI
    (SummarizerSettings(model="hosted_vllm/qwen", api_base="http://127.0.0.1:9/v1"), None, True),
    (SummarizerSettings(model="openai/gpt-4o-mini", extra={"extra_headers": {"X-Team": "a"},
                                                           "top_p": 0.5}), None, True),
    (SummarizerSettings(model="anthropic/claude-haiku-4-5"), None, False),
    (SummarizerSettings(model="hosted_vllm/qwen"), None, False),  # no api_base: litellm's business
    (SummarizerSettings(model="openai/gpt-4o-mini", extra={"num_retries": 2}), None, False),
    (SummarizerSettings(), LiteLLMParams("gemini/gemini-2.5-pro", None, "k"), False),
])
def test_the_transport_follows_the_endpoints_wire_format(summarizer: SummarizerSettings,
                                                          entry: LiteLLMParams | None, wire: bool) -> None:
    found = chosen(summarizer, entry)
    assert isinstance(found, WireSummarizer if wire else LiteLLMSummarizer)
