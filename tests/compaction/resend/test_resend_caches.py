"""The request path's caches change nothing: an engine whose caches saw every earlier request answers
each one exactly as an engine whose caches are emptied before each request (the forwarded list, the
accounting, prefix stability, what is stored)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from compaction import engine as engine_mod
from compaction.engine import Engine
from compaction.resend import previous as resend
from compaction.types import ChatTurn, Message, PreparedRequest, SummarizerChoice
from compaction.view import raw_runs, workview
from config.settings import CompactionSettings, LiteLLMParams, ModelEntry, Settings, StoreSettings
from store.encoding import forwarded, identity
from store.encoding.running_hashes import RunningHashes
from store.sqlite.store import Store
from tests.compaction.conftest import MODEL, asst, sys, tool, user
from tests.fakes.summarizer import ScriptedSummarizer

WIDE = CompactionSettings(background=False)
Engines = tuple[Engine, Store, Engine, Store]


def _engine(store: Store) -> Engine:
    settings = Settings((ModelEntry("*", LiteLLMParams("openai/*")),), compaction=WIDE)
    summarizer = ScriptedSummarizer("failing")
    return Engine(store, settings, lambda _turn: SummarizerChoice(summarizer, {"model": summarizer.name}))


@pytest.fixture
async def engines(tmp_path: Path) -> AsyncIterator[Engines]:
    warm_store = Store.open(StoreSettings(path=str(tmp_path / "warm.db"), tenant_secret="x" * 32))
    cold_store = Store.open(StoreSettings(path=str(tmp_path / "cold.db"), tenant_secret="x" * 32))
    warm, cold = _engine(warm_store), _engine(cold_store)
    yield warm, warm_store, cold, cold_store
    for engine, store in ((warm, warm_store), (cold, cold_store)):
        await engine.aclose()
        store.close()


def _turn(messages: list[Message]) -> ChatTurn:
    return ChatTurn("tenant-a", MODEL, LiteLLMParams("openai/" + MODEL), WIDE, 200_000, tuple(messages))


def _emptied(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every cache of the request path, fresh."""
    store.prefix_rows.forget()
    monkeypatch.setattr(workview, "RAW_RUNS", raw_runs.RawRuns())
    monkeypatch.setattr(identity, "CHAINS", RunningHashes(identity._chain_step))
    monkeypatch.setattr(engine_mod, "_FORWARDED", RunningHashes(engine_mod._forwarded_step))
    monkeypatch.setattr(engine_mod, "RESENDS", resend.Resends())
    forwarded._digest.cache_clear()


def _seen(prepared: PreparedRequest, store: Store) -> tuple[Any, ...]:
    """What a request produced, conversation ids aside (each store makes its own)."""
    tenant = store.for_tenant("tenant-a")
    stored = [(m.seq, m.role, m.message, m.token_count, m.chain_hash, m.content_hash, m.pinned, m.source)
              for m in tenant.messages(prepared.conversation_id)]
    fields = dataclasses.replace(prepared, conversation_id="")
    return fields, stored, [(f.messages_forwarded, f.shared_prefix, f.extends_previous)
                            for f in tenant.forwarded(prepared.conversation_id)]


def _requests() -> list[Callable[[list[dict[str, Any]]], list[dict[str, Any]]]]:
    """Each request made from the previous one's messages (its reply "ok" appended when it ended
    with a user message)."""
    return [
        lambda h: [*h, user("run the lookup")],
        lambda h: [*h, asst(None, ["c1", "c2"]), tool("c1", "found 1")],
        lambda h: [*h, tool("c2", "found 2")],  # the open round grows
        lambda h: [*h, user("and now?")],
        lambda h: [{**m, "refusal": None} if m.get("role") == "assistant" else m for m in h]
        + [user("echoed with SDK noise")],
        lambda h: [{**h[1], "pinned": True} if i == 1 else m for i, m in enumerate(h)] + [user("pin it")],
        lambda h: [*h, {**user("typed"), "n": 1}],
        lambda h: [*h[:-2], {**h[-2], "n": 1.0}, *h[-1:], user("equal in Python, not in JSON: a fork")],
        lambda h: h[:4] + [user("an edited turn: a fork")],
        lambda h: h[:-2],  # a regenerated reply: the request is shorter
        lambda h: [*h, user("last one")],
    ]


async def test_warm_caches_answer_as_cold_ones(engines: Engines, monkeypatch: pytest.MonkeyPatch) -> None:
    warm, warm_store, cold, cold_store = engines
    history = [sys("You are terse."), user("hello"), asst("hi"), user("q1"), asst("a1")]
    for make in _requests():
        history = make(history)
        for _ in range(2):  # each request twice: the second one is a pure resend
            got = await warm.prepare(_turn(history))
            with monkeypatch.context() as patch:
                _emptied(cold_store, patch)
                want = await cold.prepare(_turn(history))
            assert _seen(got, warm_store) == _seen(want, cold_store)
            assert list(got.messages) == [{k: v for k, v in m.items() if k != "pinned"} for m in history]
        if history[-1]["role"] == "user":
            for engine, prepared in ((warm, got), (cold, want)):
                engine.record_reply(prepared, _turn(history), {"role": "assistant", "content": "ok"})
            history = [*history, {"role": "assistant", "content": "ok"}]
