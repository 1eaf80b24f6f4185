"""Extractive summarizer, LiteLLM summarizer against an unreachable base, circuit breaker, prompts."""

from __future__ import annotations

import pytest

from compaction.summarize.prompts import SECTIONS, build_request, build_source_text, render_summary_message
from compaction.summarize.summarizers import CircuitBreaker, ExtractiveSummarizer, LiteLLMSummarizer
from compaction.summarize.verify import verify_summary
from compaction.tokens import TokenCounter
from compaction.types import CircuitState
from config.errors import SummarizerError
from store.models import StoredMessage, SummaryRecord
from tests.fakes.summarizer import ScriptedSummarizer


def state_of(breaker: CircuitBreaker) -> CircuitState:
    """The breaker's state now (read through a call, so each assert reads it afresh)."""
    return breaker.state


def stored(seq: int, role: str, text: str) -> StoredMessage:
    return StoredMessage(id=seq + 1, conversation_id="c", seq=seq, role=role,
                         message={"role": role, "content": text}, token_count=1, chain_hash="",
                         content_hash="")


CONVO = [stored(0, "user", "Please migrate the store to Postgres. The key is sk-abcdefghijklmnopqrstuvwx."),
         stored(1, "assistant", "We decided to use Postgres 16. I edited src/store/db.py."),
         stored(2, "tool", "x" * 5000),
         stored(3, "assistant", "The migration failed with an error in db.py; fixed by adding an index."),
         stored(4, "user", "Approval for the production deploy is pending. Next we will run the tests.")]


def test_source_text_redacted_prefixed_and_bounded() -> None:
    text = build_source_text(CONVO)
    assert "sk-abcdefghijklmnopqrstuvwx" not in text and "[REDACTED:openai_key]" in text
    assert "[#1 user]" in text and "[#3 tool]" in text
    assert "characters cut from #3;" in text and len(text) < 5000


async def test_extractive_is_structured_verifiable_and_bounded() -> None:
    counter = TokenCounter.for_model("gpt-4o")
    sources = build_source_text(CONVO)
    out = await ExtractiveSummarizer(counter).complete(build_request("leaf", "normal", sources, "", 200))
    headings = [line[3:] for line in out.splitlines() if line.startswith("## ")]
    assert headings and headings == [s for s in SECTIONS if s in headings]  # filled sections, in order
    assert "## Intent" in out and "## Errors and fixes" in out
    assert out.splitlines()[-1].startswith("Expand for details about: ")
    assert "We decided to use Postgres 16." in out and "src/store/db.py" in out
    assert verify_summary(out, sources, "").ok
    assert counter.count_text(out) <= 200


def test_summary_message_hint_only_when_tool_offered() -> None:
    record = SummaryRecord(id="sum_0123456789ab", conversation_id="c", kind="leaf", depth=0, generation=1,
                           level="normal", content="## Intent\n- x\nExpand for details about: x, y",
                           token_count=5, first_seq=12,
                           last_seq=31, source_message_ids=(), source_summary_ids=(), model="m",
                           prompt_version="v")
    with_tool = render_summary_message(record, tools_offered=True, expand_tool_name="context_expand")
    without = render_summary_message(record, tools_offered=False, expand_tool_name="context_expand")
    opening = '<ctxproxy:summary id="sum_0123456789ab" depth="0" messages="12-31">'
    assert with_tool["content"].startswith(opening)
    assert "context_expand" in with_tool["content"] and "context_expand" not in without["content"]
    assert without["content"].endswith("</ctxproxy:summary>") and without["role"] == "system"
    # The stored expand line is part of the summary format; it is forwarded only with the tools.
    assert "Expand for details about: x, y" in with_tool["content"]
    assert "Expand for details about" not in without["content"] and "- x" in without["content"]


async def test_litellm_summarizer_failure_is_summarizer_error() -> None:
    summarizer = LiteLLMSummarizer("openai/gpt-4o-mini", api_base="http://127.0.0.1:9/v1", api_key="sk-x",
                                   timeout_s=2, extra={"max_retries": 0})
    with pytest.raises(SummarizerError):
        await summarizer.complete(build_request("leaf", "normal", "text", "", 100))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_circuit_breaker_opens_half_opens_and_closes() -> None:
    clock = Clock()
    inner = ScriptedSummarizer("failing")
    breaker = CircuitBreaker(inner, failures=2, reset_s=30, clock=clock)
    request = build_request("leaf", "normal", "[#1 user]\nhello there friend.", "", 100)
    for _ in range(2):
        with pytest.raises(SummarizerError):
            await breaker.complete(request)
    assert state_of(breaker) == "open"
    with pytest.raises(SummarizerError, match="circuit open"):
        await breaker.complete(request)
    assert inner.call_count == 2  # open: not called
    clock.now = 31
    assert state_of(breaker) == "half_open"
    with pytest.raises(SummarizerError):
        await breaker.complete(request)  # failed trial re-opens
    assert state_of(breaker) == "open" and inner.call_count == 3
    clock.now = 62
    inner.behaviour = "faithful"
    assert await breaker.complete(request)
    assert state_of(breaker) == "closed" and breaker.name == inner.name
