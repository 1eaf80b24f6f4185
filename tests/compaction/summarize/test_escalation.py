"""The fallback chain: LLM normal -> aggressive -> local extractive -> truncation that keeps whole
messages behind one pointer line; rejected outputs never win; a deadline skips the LLM levels;
never raises."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.deadline import MIN_CALL_S, Deadline
from compaction.summarize.escalation import EscalationOutcome, summarize_with_escalation, truncate_sources
from compaction.summarize.prompts import build_source_text
from compaction.summarize.source_blocks import blocks
from compaction.summarize.summarizers import ExtractiveSummarizer
from compaction.tokens import TokenCounter
from compaction.types import Summarizer, SummaryRequest
from store.models import StoredMessage
from tests.fakes.summarizer import ScriptedSummarizer

COUNTER = TokenCounter.for_model("gpt-4o")


def stored(seq: int, role: str, text: str) -> StoredMessage:
    return StoredMessage(id=seq + 1, conversation_id="c", seq=seq, role=role,
                         message={"role": role, "content": text}, token_count=1, chain_hash="",
                         content_hash="")


SOURCES = build_source_text([
    stored(i, "user" if i % 2 == 0 else "assistant",
           f"Step {i}: we decided to keep order ORD-{1000 + i} at ${i * 10}.00 in src/mod{i}.py. "
           "The rest of this message is ordinary discussion about the plan and the tests. " * 3)
    for i in range(12)])
INPUT = COUNTER.count_text(SOURCES)


async def run(summarizer: Summarizer, target: int = 300, timeout_s: float | None = None) -> EscalationOutcome:
    return await summarize_with_escalation(summarizer, kind="leaf", sources_text=SOURCES, anchors_text="",
                                           target_tokens=target, counter=COUNTER, input_tokens=INPUT,
                                           timeout_s=timeout_s)


async def test_faithful_accepted_at_normal() -> None:
    outcome = await run(ScriptedSummarizer("faithful"))
    assert outcome.level == "normal" and outcome.verification == "passed"
    assert outcome.model == "fake/summarizer" and outcome.prompt_version
    assert len(outcome.attempts) == 1 and outcome.token_count < INPUT


@pytest.mark.parametrize(("behaviour", "reason"), [("inventing", "unverified"), ("empty", "empty"),
                                                   ("verbose", "not_shorter"), ("failing", "error")])
async def test_bad_normal_then_aggressive(behaviour: str, reason: str) -> None:
    fake = ScriptedSummarizer(script=[behaviour, "faithful"])
    outcome = await run(fake)
    assert outcome.level == "aggressive" and fake.call_count == 2
    assert outcome.attempts[0].reason == reason and not outcome.attempts[0].accepted
    assert "ORD-99999" not in outcome.text
    assert [c.level for c in fake.calls] == ["normal", "aggressive"]


async def test_inventions_recorded_and_the_local_extractive_level_serves() -> None:
    outcome = await run(ScriptedSummarizer("inventing"))
    assert [a.level for a in outcome.attempts] == ["normal", "aggressive", "extractive"]
    assert outcome.level == "extractive" and outcome.model == "local/extractive"
    assert outcome.verification == "passed" and "ORD-99999" not in outcome.text
    assert {a.reason for a in outcome.attempts[:2]} == {"unverified"}
    rejected = {f.lower() for f in outcome.rejected_facts}
    assert any("99999" in f for f in rejected) and any("7777" in f or "7,777" in f for f in rejected)
    assert 0 < outcome.token_count <= 300


async def test_timeout_is_a_rejection() -> None:
    outcome = await run(ScriptedSummarizer("slow", delay_s=5), timeout_s=0.01)
    assert [a.reason for a in outcome.attempts[:2]] == ["timeout", "timeout"]
    assert outcome.level == "extractive"


async def test_past_the_deadline_only_local_levels_run() -> None:
    fake = ScriptedSummarizer("faithful")
    outcome = await summarize_with_escalation(
        fake, kind="leaf", sources_text=SOURCES, anchors_text="", target_tokens=300, counter=COUNTER,
        input_tokens=INPUT, deadline=Deadline(0.0, clock=lambda: 1.0))
    assert fake.call_count == 0  # no network call once the deadline has passed
    assert [(a.level, a.reason) for a in outcome.attempts[:2]] == [("normal", "deadline"),
                                                                   ("aggressive", "deadline")]
    assert outcome.level == "extractive" and outcome.ok


class Gated(ScriptedSummarizer):
    """Answers faithfully once the test opens the gate."""

    def __init__(self) -> None:
        super().__init__("faithful")
        self.gate = asyncio.Event()
        self.started = 0

    async def complete(self, request: SummaryRequest) -> str:
        self.started += 1
        await self.gate.wait()
        return await super().complete(request)


async def test_a_call_the_deadline_cuts_is_detached_not_cancelled() -> None:
    fake = Gated()
    detached: list[asyncio.Task[str]] = []
    outcome = await summarize_with_escalation(
        fake, kind="leaf", sources_text=SOURCES, anchors_text="", target_tokens=300, counter=COUNTER,
        input_tokens=INPUT, deadline=Deadline.after(MIN_CALL_S + 0.01), detach=detached.append)
    assert [a.reason for a in outcome.attempts[:2]] == ["timeout", "deadline"]
    assert outcome.level == "extractive" and fake.started == 1
    assert len(detached) == 1 and not detached[0].done()  # still running, not cancelled
    fake.gate.set()
    assert "## Intent" in await detached[0]  # the call went on and answered


async def test_too_long_rejected() -> None:
    outcome = await run(ScriptedSummarizer("verbose"), target=40)
    assert outcome.attempts[0].reason in ("too_long", "not_shorter")
    assert outcome.token_count <= 60 and outcome.level in ("extractive", "truncation")


async def test_truncation_keeps_whole_messages_behind_one_pointer_line() -> None:
    """When every summarizer level is rejected, the summary is whole source messages plus ONE line
    naming the others (never per-message head/tail husks)."""
    sources = build_source_text([stored(0, "user", "Ship order ORD-1000 to Oslo."),
                                 stored(1, "tool", "row " * 400),
                                 stored(2, "assistant", "Shipped ORD-1000; tracking TR-55.")])
    out = truncate_sources(sources, 60, COUNTER)
    assert "[#1 user]\nShip order ORD-1000 to Oslo." in out
    assert "[#3 assistant]\nShipped ORD-1000; tracking TR-55." in out
    assert out.count("[ctxproxy: ") == 1 and "ids 2" in out and "row" not in out
    assert COUNTER.count_text(out) <= 60


async def test_extractive_summarizer_single_level() -> None:
    outcome = await run(ExtractiveSummarizer(COUNTER))
    assert outcome.level == "extractive" and outcome.model == "local/extractive"


async def test_output_redacted() -> None:
    class Leaky(ScriptedSummarizer):
        async def complete(self, request: SummaryRequest) -> str:
            return "## Intent\n- keep ORD-1000 password=hunter22"
    outcome = await run(Leaky())
    assert "hunter22" not in outcome.text


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(st.lists(st.text(min_size=1, max_size=300), min_size=1, max_size=6), st.integers(1, 400))
def test_truncation_never_longer_than_input(texts: list[str], target: int) -> None:
    sources = build_source_text([stored(i, "user", t) for i, t in enumerate(texts)])
    input_tokens = COUNTER.count_text(sources)
    limit = min(target, input_tokens - 1)
    out = truncate_sources(sources, limit, COUNTER)
    assert COUNTER.count_text(out) <= max(limit, 0)
    whole = {b.text for b in blocks(sources)}
    parts = [p for p in out.split("\n\n") if p]
    pointers = [p for p in parts if p.startswith("[ctxproxy: ")]
    assert len(pointers) <= 1  # one pointer line for everything left out
    assert all(p in whole or p in pointers for p in parts) or not out  # never a cut message
    assert COUNTER.count_text(out) < input_tokens or input_tokens == 0


@pytest.mark.parametrize(("sources", "input_tokens"), [("", 5), ("   \n\n  ", 5), (SOURCES, 1), (SOURCES, 0)])
async def test_truncation_never_yields_blank_committable_text(sources: str, input_tokens: int) -> None:
    outcome = await summarize_with_escalation(
        ScriptedSummarizer("empty"), kind="leaf", sources_text=sources, anchors_text="",
        target_tokens=300, counter=COUNTER, input_tokens=input_tokens)
    assert not outcome.ok and outcome.failure
    assert outcome.text == ""
    last = outcome.attempts[-1]
    assert last.level == "truncation" and not last.accepted and last.reason == "empty"


async def test_successful_outcomes_are_ok() -> None:
    assert (await run(ScriptedSummarizer("faithful"))).ok
    truncated = await run(ScriptedSummarizer("inventing"))
    assert truncated.ok and truncated.failure is None and truncated.text.strip()
