"""Which key a separately configured summariser gets (README: summarizer.api_key, else the
request's credentials: the model entry's key, else the client's)."""

from __future__ import annotations

import pytest

from compaction.summarizers import LiteLLMSummarizer
from compaction.types import ChatTurn, Credentials
from config.settings import CompactionSettings, LiteLLMParams, ModelEntry, Settings, SummarizerSettings
from proxy.server.summarizers import SummarizerChooser

CLIENT_KEY = "sk-client-0001"
ENTRY_KEY = "sk-entry-0002"
SUMMARISER_KEY = "sk-summariser-0003"


def key_used(summariser_key: str | None, entry_key: str | None) -> str | None:
    params = LiteLLMParams("openai/gpt-4o", "http://127.0.0.1:9/v1", entry_key)
    settings = Settings(model_list=(ModelEntry("m", params),),
                        summarizer=SummarizerSettings(model="openai/gpt-4o-mini",
                                                      api_base="http://127.0.0.1:9/sum",
                                                      api_key=summariser_key))
    turn = ChatTurn(tenant_id="t", model="m", upstream=params, settings=CompactionSettings(),
                    context_window=8192, messages=(), credentials=Credentials(CLIENT_KEY))
    summarizer = SummarizerChooser(settings)(turn).summarizer
    assert isinstance(summarizer, LiteLLMSummarizer)
    return summarizer._api_key


@pytest.mark.parametrize(("summariser_key", "entry_key", "expected"), [
    (SUMMARISER_KEY, ENTRY_KEY, SUMMARISER_KEY),
    (None, ENTRY_KEY, ENTRY_KEY),  # the client's key never leaves when the operator set one
    (None, None, CLIENT_KEY),
])
def test_configured_summariser_key_order(summariser_key: str | None, entry_key: str | None,
                                         expected: str) -> None:
    assert key_used(summariser_key, entry_key) == expected
