"""Secrets in settings never show up in reprs (tracebacks, debug logs, pytest output)."""

from __future__ import annotations

from compaction.types import ChatTurn, Credentials
from config.settings import (
    CompactionSettings,
    LiteLLMParams,
    ModelEntry,
    ServerSettings,
    Settings,
    StoreSettings,
    SummarizerSettings,
)

SECRETS = ("sk-entry-secret-0001", "sk-summarizer-secret-0002", "tenant-secret-0003",
           "admin-secret-0004", "sk-client-secret-0005")


def test_settings_and_turn_reprs_hold_no_secret() -> None:
    entry_key, summarizer_key, tenant_secret, admin_key, client_key = SECRETS
    params = LiteLLMParams("anthropic/claude", "https://api.example", entry_key)
    settings = Settings(model_list=(ModelEntry("m", params),),
                        summarizer=SummarizerSettings(model="openai/gpt-4o-mini", api_key=summarizer_key),
                        store=StoreSettings(tenant_secret=tenant_secret),
                        server=ServerSettings(admin_key=admin_key))
    turn = ChatTurn(tenant_id="t", model="m", upstream=params, settings=CompactionSettings(),
                    context_window=8192, messages=(), credentials=Credentials(client_key))
    text = repr(settings) + repr(turn) + str(settings.server) + repr(params)
    assert "claude" in text and "https://api.example" in text  # the rest is still there
    leaked = [s for s in SECRETS if s in text]
    assert leaked == []
    assert params.api_key == entry_key and settings.server.admin_key == admin_key  # values kept
