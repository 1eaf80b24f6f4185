"""Compaction steps land where the policy says: summaries shrink the context, a background step
prepares summaries down to the preparation limit without moving the view, and the engine counts
exactly what it forwards."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from compaction import recall
from compaction.engine import Engine
from compaction.tokens import TokenCounter
from compaction.types import Message, SummarizerChoice
from compaction.view.budget import MIN_LEAF_CHUNK_TOKENS, Budget
from config.settings import CompactionSettings, LiteLLMParams, ModelEntry, RecallSettings, Settings
from store.sqlite.store import Store
from tests.compaction.conftest import MODEL, asst, sys, user
from tests.compaction.test_engine import SMALL, history, make_engine, store, turn
from tests.fakes.summarizer import ScriptedSummarizer

__all__ = ["store"]  # the fixture, re-used

WINDOW = 12_000
DEFAULTS = CompactionSettings(summarize_message_threshold=10)
CLIENT_TOOLS = ({"type": "function", "function": {"name": "lookup", "description": "Find an order",
                                                  "parameters": {"type": "object", "properties": {
                                                      "q": {"type": "string"}}}}},)


@pytest.fixture
async def engine(store: Store) -> AsyncIterator[Engine]:
    e = make_engine(store, ScriptedSummarizer("faithful"))
    yield e
    await e.aclose()


def test_summary_target_scales_to_the_window_and_is_at_most_a_third_of_the_input() -> None:
    budget = Budget.compute(CompactionSettings(), WINDOW, None, 0)
    assert budget.total == 8_744
    assert budget.summary_target(CompactionSettings(), "leaf", 10_000) == 8_744 // 8
    assert budget.summary_target(CompactionSettings(), "condensed", 10_000) == 8_744 // 5
    assert budget.summary_target(CompactionSettings(), "leaf", 800) == 800 // 3
    assert budget.summary_target(CompactionSettings(), "condensed", 900) == 900 // 3
    big = Budget.compute(CompactionSettings(), 128_000, None, 0)
    assert big.summary_target(CompactionSettings(), "leaf", 50_000) == 1_200  # the default leaf_target_tokens
    assert big.summary_target(CompactionSettings(), "condensed", 50_000) == 2_000


async def test_background_step_prepares_down_to_its_level_and_leaves_the_view(engine: Engine) -> None:
    # room to prepare below the tail, and a preparation level the ~23 messages can reach
    settings = replace(DEFAULTS, fresh_tail_max_percent=25, prepare_token_percent=60, target_token_percent=90)
    msgs = history(23, words=150)  # ~155-token messages
    t = turn(msgs, window=WINDOW, settings=settings)
    first = await engine.prepare(t)
    assert not first.summary_ids and first.tokens_forwarded > first.budget * 75 // 100
    reply = asst("Your first order was ORD-1000.")
    engine.record_reply(first, t, reply)
    assert engine.after_turn(first, t)
    await engine.background.drain()
    tenant = engine.store.for_tenant("tenant-a")
    events = tenant.events(first.conversation_id)
    assert len(events) >= 2 and all(e.outcome == "committed" for e in events)
    assert all(e.tokens_after < e.tokens_before for e in events)
    level = first.budget * settings.prepare_token_percent // 100
    assert events[-1].tokens_after <= level < events[-2].tokens_after  # prepared that far, no further
    assert tenant.view(first.conversation_id) is None  # prepared ahead; the forwarded prefix is intact
    nxt = [*msgs, reply, user("thanks")]
    second = await engine.prepare(turn(nxt, window=WINDOW, settings=settings))
    assert not second.summary_ids and second.prefix_stable is True


async def test_a_step_that_finds_nothing_to_prepare_quiets_the_conversation_until_it_grows(
        engine: Engine) -> None:
    """Every turn of a prepared conversation stays over the threshold; a background step that finds
    the preparation limit reached already is not run again until a leaf chunk's worth arrives."""
    settings = replace(DEFAULTS, fresh_tail_max_percent=25)
    msgs = history(23, words=150)
    tenant = engine.store.for_tenant("tenant-a")

    async def turn_after(messages: list[Message]) -> bool:
        t = turn(messages, window=WINDOW, settings=settings)
        prepared = await engine.prepare(t)
        engine.record_reply(prepared, t, asst("noted"))
        scheduled = engine.after_turn(prepared, t)
        await engine.background.drain()
        return scheduled

    assert await turn_after(msgs)  # prepares summaries
    cid = (await engine.prepare(turn(msgs, window=WINDOW, settings=settings))).conversation_id
    prepared_events = len(tenant.events(cid))
    msgs = [*msgs, asst("noted"), user("thanks")]
    assert await turn_after(msgs)  # runs, finds the level reached: nothing new
    assert len(tenant.events(cid)) == prepared_events
    msgs = [*msgs, asst("noted"), user("and one more small thing")]
    assert not await turn_after(msgs)  # quiet: too little new material for any step
    msgs = [*msgs, asst("noted"), user(" ".join(f"detail{i}" for i in range(MIN_LEAF_CHUNK_TOKENS)))]
    assert await turn_after(msgs)  # grown by a leaf chunk's minimum: due again


async def test_a_summary_that_would_not_shrink_the_context_is_skipped(engine: Engine) -> None:
    msgs = [sys(), *[m for i in range(6) for m in (user(f"ok {i}"), asst("ok"))], user("next")]
    t = turn(msgs)
    prepared = await engine.prepare(t)
    events = await engine.compact(t, prepared.conversation_id, "manual")
    tenant = engine.store.for_tenant("tenant-a")
    assert events and events[0].outcome == "skipped" and events[0].tier == "leaf"
    assert events[0].error is not None and events[0].error.startswith("not_smaller")
    assert events[0].tokens_after == events[0].tokens_before and events[0].source_message_ids
    assert tenant.summaries(prepared.conversation_id) == []  # nothing half-committed
    assert tenant.view(prepared.conversation_id) is None
    again = await engine.prepare(turn(msgs))
    assert list(again.messages) == msgs and again.prefix_stable is True


def _offering_engine(store: Store) -> Engine:
    settings = Settings((ModelEntry("*", LiteLLMParams("openai/*")),), compaction=SMALL,
                        recall=RecallSettings())
    s = ScriptedSummarizer("faithful")
    return Engine(store, settings, lambda _: SummarizerChoice(s, {"model": s.name}))


@pytest.mark.parametrize("turns", [3, 70])
async def test_tokens_forwarded_counts_the_recall_tools_only_when_they_are_sent(
        store: Store, turns: int) -> None:
    engine = _offering_engine(store)
    counter = TokenCounter.for_model(MODEL)
    prepared = await engine.prepare(turn(history(turns), tools=CLIENT_TOOLS, offer_recall=True))
    sent = recall.should_offer(prepared, RecallSettings())
    assert sent == (turns == 70)  # only a compacted context carries the recall tools
    tools: list[dict[str, Any]] = [*CLIENT_TOOLS, *(recall.tool_schemas(RecallSettings()) if sent else [])]
    assert prepared.tokens_forwarded == counter.count_messages(prepared.messages) + counter.count_tools(tools)
    assert prepared.occupancy.tools == counter.count_tools(tools)
    assert prepared.tokens_forwarded <= prepared.budget
    await engine.aclose()
