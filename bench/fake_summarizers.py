"""Adversarial summarisers for the evaluation: ctxproxy must keep every fact and forward no invention
whatever its summariser does (design: escalation and verification).

All implement the `compaction.types.Summarizer` protocol; the well-behaved part is delegated to the
real `ExtractiveSummarizer`, so each fake differs from production in exactly one way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from compaction.summarizers import ExtractiveSummarizer
from compaction.types import Summarizer, SummaryRequest
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
        raise SummarizerError("fake/failing: the summariser is down")


ADVERSARIAL: dict[str, Callable[[], Summarizer]] = {
    "inventing": InventingSummarizer,
    "empty": EmptySummarizer,
    "verbose": VerboseSummarizer,
    "slow": SlowSummarizer,
    "failing": FailingSummarizer,
}
