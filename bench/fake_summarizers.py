"""Adversarial summarizers for the evaluation: ctxproxy must keep every fact and forward no invention
whatever its summarizer does (the fallback chain and the verifier see to it).

All implement the `compaction.types.Summarizer` protocol; the well-behaved part is delegated to the
real `ExtractiveSummarizer`, so each fake differs from production in exactly one way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Literal

from compaction import ExtractiveSummarizer, Summarizer, SummaryRequest
from config.errors import SummarizerError

# Values that appear in no generated conversation: any of them in a forwarded request is an invention.
INVENTED_LINE = ("- Refund of $98,765.43 approved for order ORD-00000 (ticket SUP-0000) by "
                 "Zebulon Krax on 2031-02-28; see src/billing/invoice_v9.py.")


class InventingSummarizer:
    """A plausible summary plus facts found in no source (a hallucinating model)."""

    name = "fake/inventing"

    async def complete(self, request: SummaryRequest) -> str:
        text = await ExtractiveSummarizer().complete(request)
        return f"{text}\n{INVENTED_LINE}"


class EmptySummarizer:
    """Returns nothing (a model that answers an empty message)."""

    name = "fake/empty"

    async def complete(self, request: SummaryRequest) -> str:
        return ""


class VerboseSummarizer:
    """Returns more than it was given (a model that ignores the target size)."""

    name = "fake/verbose"

    async def complete(self, request: SummaryRequest) -> str:
        return "\n\n".join([request.user_prompt] * 3)


class SlowSummarizer:
    """A good summary, late: exercises waiting and background scheduling (no timing is asserted)."""

    name = "fake/slow"

    def __init__(self, delay_s: float = 0.02) -> None:
        self.delay_s = delay_s

    async def complete(self, request: SummaryRequest) -> str:
        await asyncio.sleep(self.delay_s)
        return await ExtractiveSummarizer().complete(request)


class FailingSummarizer:
    """Always fails (provider down): compaction must still progress through local levels."""

    name = "fake/failing"

    async def complete(self, request: SummaryRequest) -> str:
        raise SummarizerError("fake/failing: the summarizer is down")


# A summary of invented facts in the shapes the agent-loop generator uses (none occurs in any
# generated or real conversation): what a half-broken model returns instead of a summary.
GARBAGE_SUMMARY = ("## Decisions\n- Rolled back to 7c1e0ffa93d2 and release 9.41.0-rc.7 on 2031-07-19.\n"
                   "## Files and artifacts\n- services/refunds/refund_gate_v9.py (ticket OPS-77123-z)\n"
                   "## Errors and fixes\n- KeyError: 'quirino_shard' fixed; refund R$ 98.765,43 approved.")
FAIL_CYCLE = (True, False, True, True, False, False)  # half the calls, never three failures in a row


class HalfFailingSummarizer:
    """A deterministic fake LLM that fails on half of its calls (FAIL_CYCLE, by call number) and
    otherwise returns a faithful extractive summary under an LLM's name.

    mode `raise`: a failure raises SummarizerError (a transport failure: provider down, timeout);
    mode `garbage`: a failure returns GARBAGE_SUMMARY (a well-formed summary of invented facts).
    """

    def __init__(self, mode: Literal["raise", "garbage"] = "raise") -> None:
        self.mode = mode
        self.name = "fake/half-failing" if mode == "raise" else "fake/half-garbage"
        self.calls = 0
        self.failures = 0

    async def complete(self, request: SummaryRequest) -> str:
        """A faithful summary, or by call number a failure (raised or garbage, by mode)."""
        fail = FAIL_CYCLE[self.calls % len(FAIL_CYCLE)]
        self.calls += 1
        if not fail:
            return await ExtractiveSummarizer().complete(request)
        self.failures += 1
        if self.mode == "raise":
            raise SummarizerError(f"{self.name}: provider error on call {self.calls}")
        return GARBAGE_SUMMARY


def half_failing() -> Summarizer:
    """The fake LLM that raises on half of its calls."""
    return HalfFailingSummarizer("raise")


def half_garbage() -> Summarizer:
    """The fake LLM that returns a summary of invented facts on half of its calls."""
    return HalfFailingSummarizer("garbage")


ADVERSARIAL: dict[str, Callable[[], Summarizer]] = {
    "inventing": InventingSummarizer,
    "empty": EmptySummarizer,
    "verbose": VerboseSummarizer,
    "slow": SlowSummarizer,
    "failing": FailingSummarizer,
    "half-failing": half_failing,
    "half-garbage": half_garbage,
}
