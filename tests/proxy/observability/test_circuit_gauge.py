"""`ctxproxy_summarizer_circuit_state` is the worst circuit among the breakers kept: one breaker per
tenant and endpoint, so another tenant's breaker closing does not hide an open one, and a breaker
dropped from the bounded pool no longer counts."""

from __future__ import annotations

import asyncio

import pytest
import structlog

from compaction.summarize.breakers import SummarizerPool
from compaction.summarize.prompts import build_request
from compaction.types import ChatTurn, SummarizerChoice
from config.errors import SummarizerError
from config.settings import LiteLLMParams, Settings, SummarizerSettings
from proxy.observability.metrics import Metrics
from proxy.observability.observer import ProxyObserver
from tests.fakes.summarizer import ScriptedSummarizer

MODEL = "gpt-4o-mini"
REQUEST = build_request("leaf", "normal", "[#1 user]\nOrder A-1 shipped.", "", 100)
ENDPOINT = "openai/summarizer"  # every tenant's summarizer: one endpoint, a breaker per tenant
RESET_S = 0.02


def _turn(tenant: str) -> ChatTurn:
    return ChatTurn(tenant, MODEL, LiteLLMParams("openai/" + MODEL), Settings(()).compaction, 8_000,
                    ({"role": "user", "content": "hi"},))


def _gauge(metrics: Metrics) -> float | None:
    return metrics.registry.get_sample_value("ctxproxy_summarizer_circuit_state")


async def _call(pool: SummarizerPool, tenant: str, behaviour: str) -> None:
    summarizer = pool.wrap(_turn(tenant), SummarizerChoice(ScriptedSummarizer(behaviour, name=ENDPOINT)))
    if behaviour == "failing":
        with pytest.raises(SummarizerError):
            await summarizer.summarizer.complete(REQUEST)
    else:
        await summarizer.summarizer.complete(REQUEST)


async def test_the_gauge_is_the_worst_circuit_kept() -> None:
    metrics = Metrics()
    pool = SummarizerPool(SummarizerSettings(breaker_failures=1, breaker_reset_s=RESET_S),
                          ProxyObserver(metrics, structlog.get_logger()), max_breakers=2)
    await _call(pool, "tenant-a", "failing")
    await _call(pool, "tenant-b", "failing")
    assert _gauge(metrics) == 2  # both open
    await asyncio.sleep(RESET_S * 2)
    await _call(pool, "tenant-b", "faithful")  # b's trial call succeeds: b closes, a is still open
    assert _gauge(metrics) == 2
    await _call(pool, "tenant-c", "faithful")  # a third breaker: a's, the least recent, is dropped
    await _call(pool, "tenant-d", "faithful")
    assert _gauge(metrics) == 0
