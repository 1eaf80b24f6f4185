"""A conversation continued on a model with another tokenizer is planned with that tokenizer."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from compaction.engine import Engine
from compaction.tokens import TokenCounter
from compaction.types import ChatTurn, Message, SummarizerChoice
from config.settings import CompactionSettings, LiteLLMParams, ModelEntry, Settings, StoreSettings
from store.sqlite.store import Store
from tests.fakes.summarizer import ScriptedSummarizer

SETTINGS = CompactionSettings(summarize_token_percent=70, target_token_percent=40, prepare_token_percent=30,
                              summarize_message_threshold=10, reserve_tokens=1_000,
                              safety_margin_tokens=100)
HINDI = "नमस्ते दुनिया, आज हम ऑर्डर के बारे में बात करेंगे। " * 6  # o200k: far fewer tokens than cl100k


def history(turns: int) -> list[dict[str, Any]]:
    msgs: list[Message] = [{"role": "system", "content": "You are helpful."}]
    for i in range(turns):
        msgs += [{"role": "user", "content": f"{i}: {HINDI}"},
                 {"role": "assistant", "content": f"{i}: {HINDI}"}]
    return msgs


def turn(model: str, messages: list[Message], window: int, enabled: bool = True) -> ChatTurn:
    settings = replace(SETTINGS, enabled=enabled)
    return ChatTurn("tenant-a", model, LiteLLMParams("openai/" + model), settings, window, tuple(messages))


@pytest.mark.parametrize("enabled", [True, False])
async def test_model_switch_recounts_and_every_forwarded_request_fits(tmp_path: Path, enabled: bool) -> None:
    store = Store.open(StoreSettings(path=str(tmp_path / "t.db"), tenant_secret="x" * 32))
    summarizer = ScriptedSummarizer("faithful")
    engine = Engine(store, Settings((ModelEntry("*", LiteLLMParams("openai/*")),), compaction=SETTINGS),
                    lambda _t: SummarizerChoice(summarizer, {"model": summarizer.name}))
    msgs = history(12)
    old, new = TokenCounter.for_model("gpt-4o"), TokenCounter.for_model("gpt-4")
    assert old.encoding_name != new.encoding_name
    first = await engine.prepare(turn("gpt-4o", msgs, 100_000))
    assert first.tokens_forwarded <= first.budget
    msgs = [*msgs, {"role": "user", "content": "and now?"}]
    window = (old.count_messages(msgs) + new.count_messages(msgs)) // 2 + 1_100  # fits only o200k
    assert old.count_messages(msgs) + 1_100 < window < new.count_messages(msgs) + 1_100
    prepared = await engine.prepare(turn("gpt-4", msgs, window, enabled))
    forwarded = new.count_messages(list(prepared.messages))
    assert forwarded <= prepared.budget
    assert prepared.tokens_forwarded == forwarded
    await engine.aclose()
    store.close()
