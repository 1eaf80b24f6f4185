"""Engine with a real SQLite store and the scripted summarizer: steps, hard budget, escalation."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from compaction.engine import Engine
from compaction.steps.loop import LANDING_TOLERANCE_PERCENT
from compaction.types import ChatTurn, Message, SummarizerChoice
from config.errors import InvalidRequestError
from config.settings import CompactionSettings, LiteLLMParams, ModelEntry, Settings, StoreSettings
from store.sqlite.store import Store
from tests.compaction.conftest import MODEL, asst, sys, tool, user
from tests.fakes.summarizer import INVENTED, ScriptedSummarizer

SMALL = CompactionSettings(fresh_tail_count=6, leaf_min_fanout=4, leaf_chunk_tokens=3_000,
                           leaf_target_tokens=200, condensed_target_tokens=300,
                           summarize_message_threshold=10, reserve_tokens=1_000,
                           safety_margin_tokens=100)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = Store.open(StoreSettings(path=str(tmp_path / "t.db"), tenant_secret="x" * 32))
    yield s
    s.close()


def make_engine(store: Store, summarizer: ScriptedSummarizer) -> Engine:
    settings = Settings((ModelEntry("*", LiteLLMParams("openai/*")),), compaction=SMALL)
    return Engine(store, settings, lambda turn: SummarizerChoice(summarizer, {"model": summarizer.name}))


def turn(messages: list[Message], window: int = 8_000, **kw: Any) -> ChatTurn:
    return ChatTurn("tenant-a", MODEL, LiteLLMParams("openai/" + MODEL), kw.pop("settings", SMALL),
                    window, tuple(messages), **kw)


def history(turns: int, words: int = 60) -> list[dict[str, Any]]:
    msgs = [sys("You are a support agent.")]
    for i in range(turns):
        msgs.append(user(f"Question {i}: order ORD-{1000 + i} " + "details " * words))
        msgs.append(asst(f"Answer {i}: noted order ORD-{1000 + i}. " + "explanation " * words))
    msgs.append(user("What was my first order?"))
    return msgs


@pytest.fixture
async def faithful(store: Store) -> AsyncIterator[tuple[Engine, ScriptedSummarizer]]:
    s = ScriptedSummarizer("faithful")
    engine = make_engine(store, s)
    yield engine, s
    await engine.aclose()


async def test_small_request_passes_through_untouched(
        faithful: tuple[Engine, ScriptedSummarizer]) -> None:
    engine, summarizer = faithful
    msgs = [sys(), {**user("hi"), "pinned": True}]
    prepared = await engine.prepare(turn(msgs))
    assert list(prepared.messages) == [sys(), user("hi")]
    assert not prepared.compacted and summarizer.call_count == 0 and prepared.prefix_stable is None


async def test_hard_budget_compacts_synchronously_and_fits(
        faithful: tuple[Engine, ScriptedSummarizer]) -> None:
    engine, summarizer = faithful
    msgs = history(70)
    prepared = await engine.prepare(turn(msgs))
    assert prepared.tokens_forwarded <= prepared.budget
    assert prepared.summary_ids and prepared.waited_on_summarizer and summarizer.call_count >= 1
    assert prepared.messages[0] == sys("You are a support agent.")
    assert prepared.messages[-1] == msgs[-1]
    assert all(e.outcome == "committed" and e.trigger == "hard_budget" for e in prepared.events)
    assert any(e.anchors_added for e in prepared.events)


@pytest.mark.parametrize("behaviour", ["inventing", "empty", "verbose", "failing"])
async def test_bad_summarizers_never_commit_bad_text(store: Store, behaviour: str) -> None:
    summarizer = ScriptedSummarizer(behaviour)
    engine = make_engine(store, summarizer)
    prepared = await engine.prepare(turn(history(70)))
    tenant = store.for_tenant("tenant-a")
    summaries = tenant.summaries(prepared.conversation_id)
    assert summaries and prepared.tokens_forwarded <= prepared.budget
    for s in summaries:
        assert INVENTED not in s.content and s.content.strip()
        assert s.level == "extractive"  # the local fallback, never the bad answer
    await engine.aclose()


async def test_background_prepares_ahead_then_a_step_substitutes_without_waiting(
        faithful: tuple[Engine, ScriptedSummarizer]) -> None:
    """Above the threshold, summaries are prepared off the request path and the view stays put
    (every request extends the previous one); the first request that no longer fits substitutes
    them, landing at the target or a chunk below it, and no summarizer runs while it waits."""
    engine, summarizer = faithful
    msgs = history(48, words=40)
    first = await engine.prepare(turn(msgs))
    assert not first.summary_ids and first.tokens_forwarded > first.budget * 75 // 100
    tenant = engine.store.for_tenant("tenant-a")
    previous, step = first, first
    for i in range(40):
        reply = asst(f"Answer {i}: " + "explanation " * 40)
        engine.record_reply(previous, turn(msgs), reply)
        engine.after_turn(previous, turn(msgs))
        await engine.background.drain()
        assert tenant.summaries(first.conversation_id) and engine.background.failed == 0
        msgs = [*msgs, reply, user(f"Question {100 + i}: order ORD-{2000 + i} " + "details " * 40)]
        calls = summarizer.call_count
        step = await engine.prepare(turn(msgs))
        assert summarizer.call_count == calls and not step.waited_on_summarizer and not step.events
        if step.summary_ids:
            break
        assert step.prefix_stable is True and tenant.view(first.conversation_id) is None
        previous = step
    assert step.summary_ids and step.prefix_stable is False  # the one request whose prefix moved
    target = step.budget * SMALL.target_token_percent // 100
    tolerance = step.budget * LANDING_TOLERANCE_PERCENT // 100  # whole chunks land near, not exactly at
    # deep: at or below the target (whole prepared chunks), keeping at least half of it raw or summarized
    assert target // 2 <= step.tokens_forwarded <= target + tolerance
    assert step.budget_unused_ratio == round(1 - step.tokens_forwarded / step.budget, 4)
    reply = asst("ok")
    engine.record_reply(step, turn(msgs), reply)
    following = await engine.prepare(turn([*msgs, reply, user("one more")]))
    assert following.prefix_stable is True
    assert list(following.messages[:len(step.messages)]) == list(step.messages)


async def test_tool_rounds_survive_compaction(faithful: tuple[Engine, ScriptedSummarizer]) -> None:
    engine, _ = faithful
    msgs = history(20)
    msgs[-1:] = [user("look it up"), asst(None, ["c1", "c2"]), tool("c2", "B " * 3_000),
                 tool("c1", "A " * 3_000)]
    prepared = await engine.prepare(turn(msgs))
    assert prepared.tokens_forwarded <= prepared.budget
    assert prepared.messages[-1]["tool_call_id"] == "c1"


async def test_corrections_supersede_anchors(faithful: tuple[Engine, ScriptedSummarizer]) -> None:
    engine, _ = faithful
    msgs = history(70)
    msgs.insert(3, user("My email is ana@example.com"))
    msgs.insert(4, asst("ok"))
    msgs.insert(9, user("Correction: my email is ana.silva@example.com"))
    msgs.insert(10, asst("updated"))
    prepared = await engine.prepare(turn(msgs))
    tenant = engine.store.for_tenant("tenant-a")
    emails = [a for a in tenant.anchors(prepared.conversation_id, include_superseded=True)
              if "example.com" in a.value]
    assert "ana.silva@example.com" in [a.value for a in emails if a.status == "active"]
    recorded = {i for e in prepared.events for i in e.anchors_added}
    assert {a.id for a in emails} <= recorded
    old = [a for a in emails if a.value == "ana@example.com"]
    assert old and all(a.status == "superseded" for a in old)
    assert [a.value for a in emails if a.status == "active"] == ["ana.silva@example.com"]
    new_id = next(a.id for a in emails if a.status == "active")
    assert all(a.superseded_by == new_id for a in old)


async def test_conversation_locks_do_not_accumulate(faithful: tuple[Engine, ScriptedSummarizer]) -> None:
    engine, _ = faithful
    for i in range(3):  # over the hard budget: each takes its conversation's lock
        prepared = await engine.prepare(turn([sys(f"Agent {i}."), *history(70)[1:]]))
        assert prepared.waited_on_summarizer
    gc.collect()
    assert len(engine._locks) == 0  # the growth this test guards against is internal state


async def test_a_last_user_message_that_cannot_fit_is_a_400(
        faithful: tuple[Engine, ScriptedSummarizer]) -> None:
    engine, summarizer = faithful
    msgs = [sys("You are a support agent."), *history(3)[1:-1], user("word " * 20_000)]
    with pytest.raises(InvalidRequestError) as info:
        await engine.prepare(turn(msgs))
    assert (info.value.status, info.value.code, info.value.param) == (400, "context_length_exceeded",
                                                                      "messages")
    assert summarizer.call_count == 0  # refused before any compaction work


async def test_truncate_policy_elides_the_last_user_message_as_a_recorded_step(
        faithful: tuple[Engine, ScriptedSummarizer]) -> None:
    engine, _ = faithful
    settings = replace(SMALL, oversized_last_message="truncate")
    prepared = await engine.prepare(turn([sys("You are a support agent."), user("word " * 20_000)],
                                         settings=settings))
    assert prepared.forced_truncation and prepared.tokens_forwarded <= prepared.budget
    last = str(prepared.messages[-1]["content"])
    assert last.startswith("word word") and "tokens of message" in last and "elided here" in last
    (event,) = [e for e in prepared.events if e.tier == "truncation"]
    assert (event.trigger, event.level, event.outcome) == ("hard_budget", "elision", "committed")
    assert event.tokens_after <= prepared.budget < event.tokens_before
    stored = engine.store.for_tenant("tenant-a").events(prepared.conversation_id)
    assert [e.id for e in stored if e.tier == "truncation"] == [event.id]


async def test_a_huge_newest_tool_result_is_elided_in_place_and_keeps_its_pairing(
        faithful: tuple[Engine, ScriptedSummarizer]) -> None:
    engine, _ = faithful
    msgs = [sys("You are a coding agent."), user("Fix the failing test in src/app.py."),
            asst(None, ["c1"]), tool("c1", "line of the file\n" * 4_000)]
    prepared = await engine.prepare(turn(msgs))
    assert prepared.forced_truncation and prepared.tokens_forwarded <= prepared.budget
    assert prepared.messages[1] == msgs[1]  # the task, raw
    result = prepared.messages[-1]
    assert result["role"] == "tool" and result["tool_call_id"] == "c1"
    content = str(result["content"])
    assert content.startswith("line of the file") and "tokens of tool result" in content
    assert prepared.tokens_forwarded > prepared.budget // 2  # a long excerpt, not a husk


def agent_loop(rounds_before: int, huge_tokens_words: int, rounds_after: int) -> list[dict[str, Any]]:
    """An agent session: one task, tool rounds, one huge file read among them."""
    msgs = [sys("You are a coding agent."), user("Fix the failing test in src/app.py.")]
    for i in range(rounds_before + 1 + rounds_after):
        msgs.append(asst(None, [f"c{i}"]))
        body = ("def handler(x):\n    return x\n" * huge_tokens_words if i == rounds_before
                else f"step {i}: ran the tests, 3 failed in src/app.py line {i}")
        msgs.append(tool(f"c{i}", body))
    return msgs


async def test_an_old_huge_tool_result_is_elided_in_place_just_enough(
        faithful: tuple[Engine, ScriptedSummarizer]) -> None:
    """A step elides an old oversized result in place by what is needed (its pairing kept), instead
    of summarizing its whole round and landing far below the target."""
    engine, _ = faithful
    msgs = agent_loop(3, 700, 30)
    prepared = await engine.prepare(turn(msgs))
    budget = prepared.budget
    target = budget * SMALL.target_token_percent // 100
    assert not prepared.forced_truncation and prepared.tokens_forwarded <= target
    assert prepared.tokens_forwarded > target - 200  # landed at the target, not far below it
    (elided,) = [m for m in prepared.messages if "tokens of tool result" in str(m.get("content"))]
    assert elided["role"] == "tool" and elided["tool_call_id"] == "c3"
    assert str(elided["content"]).startswith("def handler(x):")
    assert all(m in prepared.messages for m in msgs[2:8])  # the rounds around it stay raw
    (event,) = [e for e in prepared.events if e.level == "elision"]
    assert (event.tier, event.outcome, event.summarizer_model) == ("leaf", "committed", "local/elision")
    reply = asst("Looking at the handler.")
    engine.record_reply(prepared, turn(msgs), reply)
    following = await engine.prepare(turn([*msgs, reply, user("go on")]))
    assert following.prefix_stable is True and elided in following.messages
