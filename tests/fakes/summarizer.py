"""Scriptable fake summarizer implementing compaction.types.Summarizer (no network, no LLM)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from compaction.summarize.summarizers import ExtractiveSummarizer, source_from_prompt
from compaction.types import SummaryRequest
from config.errors import SummarizerError

INVENTED = "Order ORD-99999 for $7,777 approved by Zelda Quorn."
BEHAVIOURS = ("faithful", "inventing", "empty", "verbose", "slow", "failing")


def with_invention(faithful: str) -> str:
    """A faithful summary with one invented decision (its Decisions section made if it had none)."""
    if "## Decisions\n" in faithful:
        return faithful.replace("## Decisions\n", f"## Decisions\n- {INVENTED}\n", 1)
    return f"## Decisions\n- {INVENTED}\n{faithful}"


class ScriptedSummarizer:
    """Answers per `behaviour` (or a per-call `script` of behaviours, last one repeating).

    faithful: extractive, verifiable; inventing: faithful + INVENTED; empty: whitespace;
    verbose: the source repeated (longer than the input); slow: sleeps `delay_s` then faithful;
    failing: raises SummarizerError.
    """

    def __init__(self, behaviour: str = "faithful", *, script: Sequence[str] = (),
                 delay_s: float = 10.0, name: str = "fake/summarizer") -> None:
        for b in (behaviour, *script):
            if b not in BEHAVIOURS:
                raise ValueError(f"unknown behaviour {b!r}")
        self.behaviour = behaviour
        self.script = list(script)
        self.delay_s = delay_s
        self._name = name
        self.calls: list[SummaryRequest] = []
        self._extractive = ExtractiveSummarizer()

    @property
    def name(self) -> str:
        return self._name

    @property
    def call_count(self) -> int:
        return len(self.calls)

    def _current(self) -> str:
        if not self.script:
            return self.behaviour
        return self.script[min(len(self.calls) - 1, len(self.script) - 1)]

    async def complete(self, request: SummaryRequest) -> str:
        self.calls.append(request)
        behaviour = self._current()
        faithful = self._extractive.summarize(source_from_prompt(request.user_prompt),
                                              request.target_tokens)
        if behaviour == "failing":
            raise SummarizerError("scripted failure")
        if behaviour == "empty":
            return "   \n"
        if behaviour == "verbose":
            return (source_from_prompt(request.user_prompt) + "\n") * 3
        if behaviour == "slow":
            await asyncio.sleep(self.delay_s)
        if behaviour == "inventing":
            return with_invention(faithful)
        return faithful
