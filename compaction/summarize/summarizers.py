"""Summarizers behind the `Summarizer` protocol: litellm-backed, local extractive, circuit breaker.

`ExtractiveSummarizer` (compaction/summarize/extractive.py) needs no model: it copies lines of the source into
the structured sections, so its output always passes verification. `CircuitBreaker` stops calling a
summarizer whose transport keeps failing, so compaction falls through to local levels quickly.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from typing import Any, Literal

from compaction import llm
from compaction.summarize.extractive import ExtractiveSummarizer, source_from_prompt
from compaction.summarize.redact import redact
from compaction.types import CircuitState, Summarizer, SummaryRequest
from config.errors import SummarizerError

__all__ = ["OPENING_FAILURES", "BreakerFailure", "CircuitBreaker", "ExtractiveSummarizer",
           "LiteLLMSummarizer", "endpoint_identity", "source_from_prompt"]


def endpoint_identity(model: str, api_base: str | None, api_key: str | None) -> str:
    """A stable id of a summarizer endpoint (model, base, key hash): keys never appear in it."""
    key_hash = hashlib.sha256((api_key or "").encode()).hexdigest()[:32]
    return f"{model}|{api_base or ''}|{key_hash}"


class LiteLLMSummarizer:
    """Calls any litellm-supported model (including OpenAI-compatible `api_base`s) to summarize."""

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
        except Exception as exc:  # any provider failure is a summarizer failure (data, not a crash)
            raise SummarizerError(f"{self.model}: {type(exc).__name__}: {redact(str(exc))[:300]}") from exc
        return llm.response_text(response)


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
            raise SummarizerError(f"summarizer {self.name} circuit open after "
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
