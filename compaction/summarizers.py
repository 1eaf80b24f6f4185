"""Summarisers behind the `Summarizer` protocol: litellm-backed, local extractive, circuit breaker.

`ExtractiveSummarizer` needs no model: it copies whole sentences of the source into the structured
sections, so its output always passes verification. `CircuitBreaker` stops calling a failing
summariser for a while so compaction falls through to local levels quickly.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Literal

from compaction import llm
from compaction.prompts import EXPAND_LINE_PREFIX, SECTIONS
from compaction.redact import redact
from compaction.tokens import TokenCounter
from compaction.types import CircuitState, Summarizer, SummaryRequest
from config.errors import SummarizerError
from config.settings import LOCAL_EXTRACTIVE


def endpoint_identity(model: str, api_base: str | None, api_key: str | None) -> str:
    """A stable id of a summariser endpoint (model, base, key hash): keys never appear in it."""
    key_hash = hashlib.sha256((api_key or "").encode()).hexdigest()[:32]
    return f"{model}|{api_base or ''}|{key_hash}"


class LiteLLMSummarizer:
    """Calls any litellm-supported model (including OpenAI-compatible `api_base`s) to summarise."""

    def __init__(self, model: str, *, api_base: str | None = None, api_key: str | None = None,
                 timeout_s: float = 60.0, temperature: float = 0.0,
                 extra: dict[str, Any] | None = None) -> None:
        self.model = model
        self._api_base = api_base
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._temperature = temperature
        self._extra = dict(extra or {})

    def __repr__(self) -> str:
        return f"LiteLLMSummarizer(model={self.model!r}, api_base={self._api_base!r})"

    @property
    def endpoint(self) -> str:
        """Stable identity of what this instance calls (see `endpoint_identity`)."""
        return endpoint_identity(self.model, self._api_base, self._api_key)

    @property
    def name(self) -> str:
        return self.model

    async def complete(self, request: SummaryRequest) -> str:
        messages = [{"role": "system", "content": request.system_prompt},
                    {"role": "user", "content": request.user_prompt}]
        try:
            response = await llm.acompletion(
                model=self.model, messages=messages, api_base=self._api_base, api_key=self._api_key,
                timeout_s=self._timeout_s, temperature=self._temperature,
                max_tokens=max(256, request.target_tokens * 2), **self._extra)
        except Exception as exc:  # any provider failure is a summariser failure (data, not a crash)
            raise SummarizerError(f"{self.model}: {type(exc).__name__}: {redact(str(exc))[:300]}") from exc
        return llm.response_text(response)


# ------------------------------------------------------------------------------ extractive (local)

_BLOCK_HEADER = re.compile(r"^\[(#\d+) (\w+)\]$|^\[(sum_\w+) summary[^\]]*\]$")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_PATHISH = re.compile(r"(?:[\w.-]+/)+[\w.-]+\.\w+|[A-Za-z]:\\\S+")
_SECTION_KEYWORDS: dict[str, re.Pattern[str]] = {
    "Decisions": re.compile(r"(?i)\b(decided|decision|let's go with|agreed|approved|we will use|"
                            r"we'll use|chose|choose|going with)\b"),
    "Files and artifacts": _PATHISH,
    "Errors and fixes": re.compile(r"(?i)\b(error|exception|failed|failure|fix(?:ed)?|bug|traceback|"
                                   r"crash(?:ed)?)\b"),
    "Open operations and approvals": re.compile(r"(?i)\b(pending|waiting|approval|approve|todo|"
                                                r"blocked|unknown status|not yet|awaiting)\b"),
    "Next steps": re.compile(r"(?i)\b(next|will|plan to|then|going to|should)\b"),
}
_TOPIC_STOPWORDS = frozenset("""
that this with from have will would should could about there their which what when where been
were they them then than into your also just like some more only other need want make user
assistant summary message messages please thanks
""".split())  # noqa: SIM905
MAX_SENTENCE_CHARS = 400


def source_from_prompt(user_prompt: str) -> str:
    """The `<text>` part of a summariser user prompt (the whole prompt if not delimited)."""
    start, end = user_prompt.find("<text>\n"), user_prompt.rfind("\n</text>")
    return user_prompt[start + 7:end] if start >= 0 and end > start else user_prompt


def _units(source: str) -> list[tuple[str, str, str]]:
    """(ref, role, sentence) for every sentence of every block, in order."""
    ref, role, units = "", "", []
    for line in source.splitlines():
        header = _BLOCK_HEADER.match(line.strip())
        if header:
            ref = header.group(1) or header.group(3) or ""
            role = header.group(2) or "summary"
            continue
        for sentence in _SENTENCE_SPLIT.split(line):
            sentence = sentence.strip()
            if len(sentence) >= 3 and len(sentence) <= MAX_SENTENCE_CHARS:
                units.append((ref, role, sentence))
    return units


class ExtractiveSummarizer:
    """`local/extractive`: deterministic sentence selection into the structured sections."""

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self._counter = counter

    @property
    def name(self) -> str:
        return LOCAL_EXTRACTIVE

    async def complete(self, request: SummaryRequest) -> str:
        return self.summarise(source_from_prompt(request.user_prompt), request.target_tokens)

    def summarise(self, source: str, target_tokens: int) -> str:
        """Structured, verbatim summary of `source` in about `target_tokens`."""
        counter = self._counter or TokenCounter.for_model("")
        candidates = self._candidates(_units(source))
        chosen: dict[str, list[str]] = {s: [] for s in SECTIONS}
        used = counter.count_text(self._render(chosen, source))
        for section, line in self._round_robin(candidates):
            cost = counter.count_text(line) + 1
            if used + cost <= target_tokens:
                chosen[section].append(line)
                used += cost
        return self._render(chosen, source)

    def _candidates(self, units: list[tuple[str, str, str]]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {s: [] for s in SECTIONS}
        used: set[str] = set()
        user_units = [u for u in units if u[1] == "user"] or units
        out["Intent"] = [_bullet(ref, s) for ref, _, s in user_units[:3]]
        used.update(s for _, _, s in user_units[:3])
        tail = units[-12:]
        for section, pattern in _SECTION_KEYWORDS.items():
            pool = tail if section == "Next steps" else units
            for ref, _, sentence in pool:
                if sentence not in used and pattern.search(sentence):
                    out[section].append(_bullet(ref, sentence))
                    used.add(sentence)
        return out

    @staticmethod
    def _round_robin(candidates: dict[str, list[str]]) -> list[tuple[str, str]]:
        order: list[tuple[str, str]] = []
        depth = max((len(v) for v in candidates.values()), default=0)
        for index in range(depth):
            order += [(s, lines[index]) for s, lines in candidates.items() if index < len(lines)]
        return order

    @staticmethod
    def _render(chosen: dict[str, list[str]], source: str) -> str:
        body = [f"## {s}\n" + ("\n".join(chosen[s]) or "- none") for s in SECTIONS]
        return "\n".join(body) + f"\n{EXPAND_LINE_PREFIX} {', '.join(_topics(source))}"


def _bullet(ref: str, sentence: str) -> str:
    return f"- {sentence} ({ref})" if ref else f"- {sentence}"


def _topics(source: str, limit: int = 5) -> list[str]:
    """The most frequent content words of the source (lowercase, as written), for the expand line."""
    words = re.findall(r"\b[a-z][a-z_-]{3,}\b", source)
    counts = Counter(w for w in words if w not in _TOPIC_STOPWORDS)
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]] or ["history"]


# ---------------------------------------------------------------------------------- circuit breaker


BreakerFailure = Literal["transport", "timeout", "rejection"]
OPENING_FAILURES: frozenset[BreakerFailure] = frozenset({"transport", "timeout"})


class CircuitBreaker:
    """Wraps a Summarizer: opens after `failures` consecutive transport failures or timeouts, then
    lets one trial call through after `reset_s`.

    `complete()` counts what it sees itself: an exception is a `transport` failure, a timeout or a
    cancellation a `timeout` (both re-raised). A content rejection found later by the caller (empty,
    not shorter, too long, unverified) is reported with `record_failure("rejection")` (or
    `record_rejection()`): it is counted in `rejections` but never opens the circuit, because the
    endpoint answered and the next fallback level handles the content.
    """

    def __init__(self, inner: Summarizer, *, failures: int = 5, reset_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.inner = inner
        self._threshold = max(1, failures)
        self._reset_s = reset_s
        self._clock = clock
        self._consecutive = 0
        self._opened_at: float | None = None
        self._trial_running = False
        self.rejections = 0  # content rejections reported by the caller (observability only)

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def state(self) -> CircuitState:
        """closed | open | half_open (for metrics)."""
        if self._opened_at is None:
            return "closed"
        return "half_open" if self._clock() - self._opened_at >= self._reset_s else "open"

    async def complete(self, request: SummaryRequest) -> str:
        state = self.state
        if state == "open" or (state == "half_open" and self._trial_running):
            raise SummarizerError(f"summariser {self.name} circuit open after "
                                  f"{self._consecutive} consecutive failures", code="circuit_open")
        self._trial_running = state == "half_open"
        try:
            result = await self.inner.complete(request)
        except (TimeoutError, asyncio.CancelledError):  # a timeout cancels the call: count it too
            self.record_failure("timeout")
            raise
        except Exception:
            self.record_failure("transport")
            raise
        finally:
            self._trial_running = False
        self._consecutive, self._opened_at = 0, None  # the endpoint answered: transport is fine
        return result

    def record_failure(self, kind: BreakerFailure = "rejection") -> None:
        """Count a failure of `kind`; only `transport` and `timeout` move the circuit towards open.

        The default is a content rejection (the one report callers made before kinds existed).
        """
        if kind not in OPENING_FAILURES:
            self.record_rejection()
            return
        self._consecutive += 1
        if self._opened_at is not None or self._consecutive >= self._threshold:
            self._opened_at = self._clock()

    def record_rejection(self) -> None:
        """The last answer arrived but its content was unusable: counted, never opens the circuit."""
        self.rejections += 1
