"""Circuit breaker: transport failures and timeouts open it, content rejections never do; one breaker
per endpoint."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from compaction.engine import Engine
from compaction.observer import NullObserver, ObservedSummarizer
from compaction.summarize.escalation import summarize_with_escalation
from compaction.summarize.prompts import build_request
from compaction.summarize.summarizers import CircuitBreaker, endpoint_identity
from compaction.tokens import TokenCounter
from compaction.types import ChatTurn, CircuitState, SummarizerChoice, SummaryRequest
from config.errors import SummarizerError
from config.settings import LiteLLMParams, ModelEntry, Settings, StoreSettings, SummarizerSettings
from store.sqlite.store import Store
from tests.compaction.conftest import MODEL
from tests.fakes.summarizer import ScriptedSummarizer

REQUEST = build_request("leaf", "normal", "[#1 user]\nhello there friend.", "", 100)
SOURCES = "[#1 user]\n" + "We agreed to ship order ORD-1234 to Oslo on Friday. " * 20


def state_of(breaker: CircuitBreaker) -> CircuitState:
    """The breaker's state now (read through a call, so each assert reads it afresh)."""
    return breaker.state


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Hanging:
    """Never answers (until cancelled)."""

    name = "fake/hanging"

    async def complete(self, request: SummaryRequest) -> str:
        await asyncio.Event().wait()
        return ""


async def test_timeout_in_half_open_trial_reopens() -> None:
    clock = Clock()
    breaker = CircuitBreaker(ScriptedSummarizer("failing"), failures=1, reset_s=30, clock=clock)
    with pytest.raises(SummarizerError):
        await breaker.complete(REQUEST)
    clock.now = 31
    breaker.inner = Hanging()
    assert state_of(breaker) == "half_open"
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(breaker.complete(REQUEST), 0.01)
    assert state_of(breaker) == "open"  # the timed-out trial counted as a failure


async def test_cancellation_counts_and_is_reraised() -> None:
    breaker = CircuitBreaker(Hanging(), failures=1, reset_s=30, clock=Clock())
    task = asyncio.create_task(breaker.complete(REQUEST))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert state_of(breaker) == "open"


@pytest.mark.parametrize("behaviour", ["empty", "inventing", "verbose"])
async def test_content_rejections_never_open_the_breaker(behaviour: str) -> None:
    """An endpoint that answers with unusable text is working: the next fallback level handles the
    content, and the summarizer stays in use (rejections are not failures)."""
    inner = ScriptedSummarizer(behaviour)
    breaker = CircuitBreaker(inner, failures=2, reset_s=30, clock=Clock())
    observed = ObservedSummarizer(breaker, NullObserver())
    counter = TokenCounter.for_model(MODEL)
    for _ in range(3):
        outcome = await summarize_with_escalation(
            observed, kind="leaf", sources_text=SOURCES, anchors_text="", target_tokens=60,
            counter=counter, input_tokens=counter.count_text(SOURCES))
        assert outcome.model != inner.name  # the rejected text was not committed
    assert state_of(breaker) == "closed"
    assert inner.call_count >= 3 and breaker.rejections == inner.call_count


async def test_failure_kinds_transport_and_timeout_open_rejection_does_not() -> None:
    breaker = CircuitBreaker(ScriptedSummarizer("faithful"), failures=2, reset_s=30, clock=Clock())
    for _ in range(5):
        breaker.record_failure("rejection")
    breaker.record_rejection()
    breaker.record_failure()  # the default kind is a content rejection
    assert state_of(breaker) == "closed" and breaker.rejections == 7
    breaker.record_failure("transport")
    assert state_of(breaker) == "closed"
    breaker.record_failure("timeout")
    assert state_of(breaker) == "open"


async def test_rejections_do_not_undo_the_reset_of_a_successful_call() -> None:
    breaker = CircuitBreaker(ScriptedSummarizer(script=["failing", "faithful"]), failures=2,
                             reset_s=30, clock=Clock())
    with pytest.raises(SummarizerError):
        await breaker.complete(REQUEST)
    await breaker.complete(REQUEST)
    breaker.record_rejection()  # the answer was unusable, but the endpoint answered
    breaker.record_failure("transport")
    assert state_of(breaker) == "closed"  # one failure since the reset, threshold two


async def test_usable_answer_still_resets_the_count() -> None:
    breaker = CircuitBreaker(ScriptedSummarizer(script=["failing", "faithful", "failing"]),
                             failures=2, reset_s=30, clock=Clock())
    for expect_error in (True, False, True):
        if expect_error:
            with pytest.raises(SummarizerError):
                await breaker.complete(REQUEST)
        else:
            await breaker.complete(REQUEST)
    assert state_of(breaker) == "closed"


class EndpointFailing(ScriptedSummarizer):
    """A failing summarizer with a stable endpoint identity (like LiteLLMSummarizer)."""

    def __init__(self, calls: list[str]) -> None:
        super().__init__("failing", name="openai/gpt-4o-mini")
        self._log = calls

    @property
    def endpoint(self) -> str:
        return endpoint_identity("openai/gpt-4o-mini", "http://x/v1", "k")

    async def complete(self, request: SummaryRequest) -> str:
        self._log.append("call")
        return await super().complete(request)


async def test_breaker_survives_new_instances_of_the_same_endpoint(tmp_path: Path) -> None:
    store = Store.open(StoreSettings(path=str(tmp_path / "t.db"), tenant_secret="x" * 32))
    calls: list[str] = []
    settings = Settings((ModelEntry("*", LiteLLMParams("openai/*")),),
                        summarizer=SummarizerSettings(breaker_failures=3))
    engine = Engine(store, settings,
                    lambda _turn: SummarizerChoice(EndpointFailing(calls), {"model": "m"}))
    turn = ChatTurn("tenant-a", MODEL, LiteLLMParams("openai/" + MODEL), settings.compaction, 8_000,
                    ({"role": "user", "content": "hi"},))
    errors: list[Any] = []
    for _ in range(5):  # a new instance every turn (an evicted cache entry)
        choice = engine._choice(turn)
        with pytest.raises(SummarizerError) as info:
            await choice.summarizer.complete(REQUEST)
        errors.append(info.value.code)
    assert len(calls) == 3 and errors[3:] == ["circuit_open", "circuit_open"]
    await engine.aclose()
    store.close()


def test_breakers_are_bounded_and_recent_ones_are_kept() -> None:
    from compaction.summarize.breakers import SummarizerPool

    pool = SummarizerPool(SummarizerSettings(), NullObserver(), max_breakers=3)
    summarizer = ScriptedSummarizer("faithful", name="openai/gpt-4o-mini")

    def turn(tenant: str) -> ChatTurn:
        return ChatTurn(tenant, MODEL, LiteLLMParams("openai/" + MODEL), Settings(()).compaction, 8_000,
                        ({"role": "user", "content": "hi"},))

    first = pool.wrap(turn("t0"), SummarizerChoice(summarizer, {})).summarizer
    for n in range(1, 50):  # one new tenant per turn, t0 used again each time
        pool.wrap(turn(f"t{n}"), SummarizerChoice(summarizer, {}))
        assert pool.wrap(turn("t0"), SummarizerChoice(summarizer, {})).summarizer is first
    assert len(pool) == 3


def test_observed_local_summarizers_are_bounded_and_kept_while_in_use() -> None:
    from compaction.summarize.breakers import MAX_LOCAL_OBSERVED, SummarizerPool
    from compaction.summarize.extractive import ExtractiveSummarizer

    pool = SummarizerPool(SummarizerSettings(), NullObserver())
    turn = ChatTurn("t", MODEL, LiteLLMParams("openai/" + MODEL), Settings(()).compaction, 8_000,
                    ({"role": "user", "content": "hi"},))
    kept = ExtractiveSummarizer()
    first = pool.wrap(turn, SummarizerChoice(kept, {})).summarizer
    for _ in range(MAX_LOCAL_OBSERVED * 3):  # a chooser making a new local instance every turn
        pool.wrap(turn, SummarizerChoice(ExtractiveSummarizer(), {}))
        assert pool.wrap(turn, SummarizerChoice(kept, {})).summarizer is first
    assert pool.local_observed == MAX_LOCAL_OBSERVED
