"""A large request is tokenised in a worker thread before ingest; a small one is counted as stored;
what the store holds already is not counted again."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from compaction import engine as engine_mod
from compaction.engine import PRECOUNT_MESSAGES, Engine, precounted
from compaction.resend.previous import Resends
from compaction.tokens import TokenCounter
from compaction.types import ChatTurn, Message, SummarizerChoice
from config.settings import CompactionSettings, LiteLLMParams, ModelEntry, Settings, StoreSettings
from store.sqlite.store import Store
from tests.compaction.conftest import MODEL
from tests.fakes.summarizer import ScriptedSummarizer


class ThreadNotingCounter(TokenCounter):
    """Counts characters and notes the thread of every message counted."""

    def __init__(self) -> None:
        super().__init__("chars", len)
        self.threads: list[threading.Thread] = []

    def count_message(self, message: Any) -> int:
        self.threads.append(threading.current_thread())
        return super().count_message(message)


def messages(n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"message {i}", "pinned": i == 0} for i in range(n)]


async def test_large_request_is_counted_off_the_loop_with_the_same_counts() -> None:
    counter, batch = ThreadNotingCounter(), messages(PRECOUNT_MESSAGES)
    count = await precounted(counter, batch)
    assert counter.threads and all(t is not threading.main_thread() for t in counter.threads)
    plain = TokenCounter("chars", len)
    expected = [plain.count_message({k: v for k, v in m.items() if k != "pinned"}) for m in batch[:50]]
    assert [count(m) for m in batch[:50]] == expected
    assert len(counter.threads) == len(batch)  # looked up, not counted again


async def test_small_request_is_counted_when_stored() -> None:
    counter, batch = ThreadNotingCounter(), messages(10)
    count = await precounted(counter, batch)
    assert counter.threads == []
    assert count(batch[3]) > 0 and counter.threads == [threading.main_thread()]


async def test_a_resent_long_history_is_counted_only_past_what_is_stored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A history too large for the resend memo (here: the memo forgotten) is recognised by the store;
    only its new messages are tokenised, not the whole resent history again."""
    handed: list[int] = []

    async def noting(counter: TokenCounter, batch: list[Message], *args: Any, **kw: Any) -> Any:
        handed.append(len(batch))
        return await precounted(counter, batch, *args, **kw)

    monkeypatch.setattr(engine_mod, "precounted", noting)
    resends = Resends()
    monkeypatch.setattr(engine_mod, "RESENDS", resends)
    store = Store.open(StoreSettings(path=str(tmp_path / "t.db"), tenant_secret="x" * 32))
    settings = CompactionSettings(enabled=False)
    engine = Engine(store, Settings((ModelEntry("*", LiteLLMParams("openai/*")),), compaction=settings),
                    lambda turn: SummarizerChoice(ScriptedSummarizer("faithful"), {"model": "faithful"}))
    history: list[Message] = [{"role": "system", "content": "You are terse."}]
    for i in range(PRECOUNT_MESSAGES // 2):
        history += [{"role": "user", "content": f"job J-{i} status?"},
                    {"role": "assistant", "content": f"J-{i} done"}]
    try:
        first = await engine.prepare(_turn(history, settings))
        resends.forget()  # as when the history is over the memo's bound
        resent = [*history, {"role": "user", "content": "and J-7?"}]
        again = await engine.prepare(_turn(resent, settings))
    finally:
        await engine.aclose()
        store.close()
    assert handed == [len(history), 1]
    assert again.conversation_id == first.conversation_id
    stored = store_messages(tmp_path, again.conversation_id)
    assert stored[-1] == TokenCounter.for_model(MODEL).count_message(resent[-1])


def _turn(messages: list[Message], settings: CompactionSettings) -> ChatTurn:
    return ChatTurn("tenant-a", MODEL, LiteLLMParams("openai/" + MODEL), settings, 1_000_000, tuple(messages))


def store_messages(tmp_path: Path, conversation_id: str) -> list[int]:
    """The stored token counts of the conversation, read back from the store file."""
    store = Store.open(StoreSettings(path=str(tmp_path / "t.db"), tenant_secret="x" * 32))
    try:
        return [m.token_count for m in store.for_tenant("tenant-a").messages(conversation_id)]
    finally:
        store.close()
