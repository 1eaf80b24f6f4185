"""Which key a separately configured summarizer gets (docs/configuration.md: summarizer.api_key, else the
request's credentials: the model entry's key, else the client's)."""

from __future__ import annotations

import pytest

from compaction.summarize.summarizers import LiteLLMSummarizer
from compaction.types import ChatTurn, Credentials
from config.settings import CompactionSettings, LiteLLMParams, ModelEntry, Settings, SummarizerSettings
from proxy.summarizers import SummarizerChooser

CLIENT_KEY = "sk-client-0001"
ENTRY_KEY = "sk-entry-0002"
SUMMARIZER_KEY = "sk-summarizer-0003"


def key_used(summarizer_key: str | None, entry_key: str | None) -> str | None:
    params = LiteLLMParams("openai/gpt-4o", "http://127.0.0.1:9/v1", entry_key)
    settings = Settings(model_list=(ModelEntry("m", params),),
                        summarizer=SummarizerSettings(model="openai/gpt-4o-mini",
                                                      api_base="http://127.0.0.1:9/sum",
                                                      api_key=summarizer_key))
    turn = ChatTurn(tenant_id="t", model="m", upstream=params, settings=CompactionSettings(),
                    context_window=8192, messages=(), credentials=Credentials(CLIENT_KEY))
    summarizer = SummarizerChooser(settings)(turn).summarizer
    assert isinstance(summarizer, LiteLLMSummarizer)
    return summarizer._api_key


@pytest.mark.parametrize(("summarizer_key", "entry_key", "expected"), [
    (SUMMARIZER_KEY, ENTRY_KEY, SUMMARIZER_KEY),
    (None, ENTRY_KEY, ENTRY_KEY),  # the client's key never leaves when the operator set one
    (None, None, CLIENT_KEY),
])
def test_configured_summarizer_key_order(summarizer_key: str | None, entry_key: str | None,
                                         expected: str) -> None:
    assert key_used(summarizer_key, entry_key) == expected
