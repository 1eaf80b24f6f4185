"""A slow summarizer never blocks a turn: background steps prepare summaries without the request's
lock, an under-budget turn never waits, and a turn that must compact waits at most its deadline
(`compaction.sync_deadline_s`), then goes on with the local levels."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from compaction import ExtractiveSummarizer, deadline
from compaction.engine import Engine
from compaction.steps.loop import landing_tolerance
from compaction.types import SummarizerChoice
from compaction.view.budget import Budget
from config.settings import LiteLLMParams, ModelEntry, Settings
from store.sqlite.store import Store
from tests.compaction.conftest import asst, user
from tests.compaction.test_engine import SMALL, history, make_engine, turn
from tests.fakes.summarizer import ScriptedSummarizer

HANG_GUARD_S = 60.0  # only so a regression fails instead of hanging; never a timing assertion


@pytest.fixture
def store(tmp_path: Path) -> Any:
    from config.settings import StoreSettings

    s = Store.open(StoreSettings(path=str(tmp_path / "slow.db"), tenant_secret="y" * 32))
    yield s
    s.close()


async def _background_step_in_flight(engine: Engine, summarizer: ScriptedSummarizer
                                     ) -> tuple[str, list[dict[str, Any]]]:
    """Prepare a turn above the threshold (under budget) and start its background step."""
    msgs = history(48, words=40)
    first = await engine.prepare(turn(msgs))
    assert not first.waited_on_summarizer and first.tokens_forwarded <= first.budget
    reply = asst("Your first order was ORD-1000.")
    engine.record_reply(first, turn(msgs), reply)
    assert engine.after_turn(first, turn(msgs))
    while summarizer.call_count == 0:  # the background step reached the (never-ending) summarizer
        await asyncio.sleep(0)
    return first.conversation_id, [*msgs, reply]


async def test_under_budget_turns_do_not_wait_while_a_step_is_stuck(store: Store) -> None:
    summarizer = ScriptedSummarizer("slow", delay_s=3_600)
    engine = make_engine(store, summarizer)
    try:
        cid, msgs = await _background_step_in_flight(engine, summarizer)
        assert engine.background.is_running(cid)
        for i in range(3):
            msgs = [*msgs, user(f"short follow-up {i}")]
            prepared = await asyncio.wait_for(engine.prepare(turn(msgs)), HANG_GUARD_S)
            assert not prepared.waited_on_summarizer and not prepared.events
            assert prepared.tokens_forwarded <= prepared.budget
            msgs.append(asst("ok"))
        assert summarizer.call_count == 1  # no summarizer call on the request path
        assert engine.background.running == 1
    finally:
        await engine.aclose()
    assert engine.background.running == 0


async def test_a_stuck_step_is_cancelled_on_close_without_committing(store: Store) -> None:
    summarizer = ScriptedSummarizer("slow", delay_s=3_600)
    engine = make_engine(store, summarizer)
    cid, _ = await _background_step_in_flight(engine, summarizer)
    await engine.aclose()
    tenant = store.for_tenant("tenant-a")
    assert not engine.background.is_running(cid)
    assert tenant.summaries(cid) == [] and tenant.view(cid) is None


async def test_a_request_that_must_compact_goes_on_at_the_deadline(store: Store) -> None:
    """The summarizer never answers: the request still gets its answer, served by the local
    extractive level once its deadline passed; the cut LLM call goes on off the request path."""
    summarizer = ScriptedSummarizer("slow", delay_s=3_600)
    engine = make_engine(store, summarizer)
    settings = replace(SMALL, sync_deadline_s=1.0)
    try:
        prepared = await asyncio.wait_for(engine.prepare(turn(history(70), settings=settings)),
                                          HANG_GUARD_S)
        assert prepared.tokens_forwarded <= prepared.budget and prepared.summary_ids
        assert prepared.waited_on_summarizer and summarizer.call_count <= 1  # then no more calls
        levels = {e.level for e in prepared.events if e.outcome == "committed"}
        assert levels <= {"extractive", "elision"} and "extractive" in levels
        assert engine.background.detached == summarizer.call_count  # a cut call goes on, off the path
        tenant = store.for_tenant("tenant-a")
        assert tenant.view(prepared.conversation_id) is not None  # the step landed and was saved
    finally:
        await engine.aclose()
    assert engine.background.detached == 0  # cancelled on close


async def test_concurrent_requests_do_not_wait_on_each_others_stuck_step(store: Store) -> None:
    summarizer = ScriptedSummarizer("slow", delay_s=3_600)
    engine = make_engine(store, summarizer)
    settings = replace(SMALL, sync_deadline_s=0.3)
    msgs = history(70)
    try:
        first, second = await asyncio.wait_for(asyncio.gather(
            engine.prepare(turn(msgs, settings=settings)),
            engine.prepare(turn([*msgs[:-1], user("And my second order?")], settings=settings))),
            HANG_GUARD_S)
        assert first.tokens_forwarded <= first.budget and second.tokens_forwarded <= second.budget
    finally:
        await engine.aclose()


async def test_past_the_deadline_and_its_grace_no_further_pass_starts(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Local passes are CPU work on the engine's one loop (an imported history's first request):
    once the deadline and its local grace are spent, no further pass starts and the request is
    truncated to fit; nothing is lost (the store holds the whole history). With time left, the same
    request compacts until it fits."""
    monkeypatch.setattr(deadline, "LOCAL_GRACE_S", 0.0)
    engine = make_engine(store, ScriptedSummarizer("faithful"))

    async def passes(sync_deadline_s: float, topic: str) -> tuple[int, bool]:
        msgs = [{"role": "system", "content": f"You are a {topic} agent."}, *history(70)[1:]]
        settings = replace(SMALL, sync_deadline_s=sync_deadline_s)
        prepared = await asyncio.wait_for(engine.prepare(turn(msgs, settings=settings)), HANG_GUARD_S)
        assert prepared.tokens_forwarded <= prepared.budget
        assert len(store.for_tenant("tenant-a").messages(prepared.conversation_id)) == len(msgs)
        return (sum(e.outcome == "committed" and e.level != "elision" for e in prepared.events),
                prepared.forced_truncation)

    try:
        with_time = await passes(60.0, "billing")
        # 1 ms: LLM levels are skipped (too little time left for a call), the local ones stop at once
        out_of_time = await passes(0.001, "shipping")
    finally:
        await engine.aclose()
    assert with_time[0] > 1 and not with_time[1]
    assert out_of_time[0] <= 1 and out_of_time[1]


async def test_another_conversation_is_served_between_a_long_steps_passes(store: Store) -> None:
    """A step with a local summarizer never waits on the network, so without a pause between its
    passes it would hold the engine's loop until done: another conversation's small request is
    prepared while the long step is still running."""
    local = ExtractiveSummarizer()
    engine = Engine(store, Settings((ModelEntry("*", LiteLLMParams("openai/*")),), compaction=SMALL),
                    lambda turn: SummarizerChoice(local, {"model": local.name}))
    done: list[str] = []

    async def prepared(name: str, messages: list[dict[str, Any]]) -> None:
        await engine.prepare(turn(messages))
        done.append(name)

    try:
        await asyncio.wait_for(asyncio.gather(
            prepared("long", history(120)), prepared("small", [user("Hello, a different conversation.")])),
            HANG_GUARD_S)
    finally:
        await engine.aclose()
    assert done == ["small", "long"]


async def test_a_background_step_gives_way_to_a_request_that_must_compact(store: Store) -> None:
    """Preparing ahead is not worth a turn's wait: a request of the conversation that must compact
    now takes over after the background pass under way, instead of waiting for the whole step."""
    summarizer = ScriptedSummarizer("slow", delay_s=0.05)
    engine = make_engine(store, summarizer)
    try:
        cid, msgs = await _background_step_in_flight(engine, summarizer)
        over = [*msgs, user("Here is the full log: " + "line of log output " * 900)]
        prepared = await asyncio.wait_for(engine.prepare(turn(over)), HANG_GUARD_S)
        assert prepared.conversation_id == cid and prepared.tokens_forwarded <= prepared.budget
        triggers = [e.trigger for e in store.for_tenant("tenant-a").events(cid)]  # in recorded order
        first = triggers.index("hard_budget") if "hard_budget" in triggers else len(triggers)
        assert triggers[:first].count("threshold") <= 2  # the pass under way (one more on a slow machine)
    finally:
        await engine.aclose()


async def test_a_step_that_prepared_summaries_leave_high_lands_with_the_local_levels(store: Store) -> None:
    """Background steps prepared the oldest chunks; turns added since are not. A request step lands
    within the budget on the prepared summaries but far above the target: landing there, the next
    requests would step again (another cache rewrite). It goes on to the target with the local
    levels, without calling the (now hanging) summarizer."""
    summarizer = ScriptedSummarizer("faithful", delay_s=3_600)
    engine = make_engine(store, summarizer)
    settings = replace(SMALL, sync_deadline_s=60.0)
    msgs = history(30)
    try:
        first = await engine.prepare(turn(msgs, settings=settings))
        assert first.tokens_forwarded <= first.budget and not first.events
        engine.record_reply(first, turn(msgs, settings=settings), asst("ORD-1000."))
        assert engine.after_turn(first, turn(msgs, settings=settings))
        await engine.background.drain()
        prepared_calls = summarizer.call_count
        assert prepared_calls > 0 and store.for_tenant("tenant-a").summaries(first.conversation_id)
        summarizer.behaviour = "slow"  # from here on, a call would hang the request
        more = [*msgs, asst("ORD-1000."), *history(20)[1:]]
        second = await asyncio.wait_for(engine.prepare(turn(more, settings=settings)), HANG_GUARD_S)
    finally:
        await engine.aclose()
    assert summarizer.call_count == prepared_calls  # nothing waited on the summarizer
    budget = Budget.for_turn(turn(more, settings=settings), 0)
    landing_limit = budget.target + landing_tolerance(budget)
    assert second.conversation_id == first.conversation_id
    assert second.tokens_forwarded <= landing_limit < second.budget
    local = [e for e in second.events if e.outcome == "committed" and e.level == "extractive"]
    assert local and all(e.trigger == "hard_budget" for e in local)
