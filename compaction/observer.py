"""The engine's observability seam: what compaction reports, without knowing who listens.

compaction/ never imports prometheus or the proxy's logger; the proxy passes an object
implementing `CompactionObserver` (structlog + Prometheus) and the engine calls it. `NullObserver`
is the default, so the engine runs (and tests) with nobody listening.
"""

from __future__ import annotations

import time
from typing import Protocol

from compaction.types import Summarizer, SummaryRequest
from store.models import CompactionEvent


class CompactionObserver(Protocol):
    """Receives every compaction step, summarizer call, circuit transition and background failure."""

    def on_step(self, event: CompactionEvent) -> None:
        """One compaction step, as recorded in the store (committed or failed)."""

    def on_summarizer_call(self, model: str, seconds: float, ok: bool) -> None:
        """One real summarizer call (a call refused by an open circuit is not one)."""

    def on_circuit_state(self, name: str, state: str, circuit: str = "") -> None:
        """Summarizer `name`'s circuit `circuit` (one breaker: a tenant and an endpoint; "" for the
        name alone) changed state: `closed`, `half_open` or `open`; `closed` too when it is dropped."""

    def on_level_rejected(self, conversation_id: str, model: str, level: str, reason: str,
                          error: str | None, rejected_facts: tuple[str, ...]) -> None:
        """An escalation level's output was not committed (reason: error, timeout, empty,
        not_shorter, too_long, unverified); `error` is already redacted."""

    def on_background_error(self, conversation_id: str, attempt: int, error: str) -> None:
        """A background compaction attempt raised (it is retried, then left for the next turn)."""

    def on_early_mismatch(self, conversation_id: str, fields: tuple[str, ...]) -> None:
        """A request forwarded early (compaction/resend/early_forward.py) differs from its full preparation
        in `fields`: a ctxproxy bug (what was forwarded was still the client's messages as received)."""


class NullObserver:
    """Listens to nothing (the default)."""

    def on_step(self, event: CompactionEvent) -> None:
        return None

    def on_summarizer_call(self, model: str, seconds: float, ok: bool) -> None:
        return None

    def on_circuit_state(self, name: str, state: str, circuit: str = "") -> None:
        return None

    def on_level_rejected(self, conversation_id: str, model: str, level: str, reason: str,
                          error: str | None, rejected_facts: tuple[str, ...]) -> None:
        return None

    def on_background_error(self, conversation_id: str, attempt: int, error: str) -> None:
        return None

    def on_early_mismatch(self, conversation_id: str, fields: tuple[str, ...]) -> None:
        return None


CIRCUIT_OPEN_CODE = "circuit_open"


class ObservedSummarizer:
    """Wraps a summarizer (or its circuit breaker): times each call, reports circuit transitions."""

    def __init__(self, inner: Summarizer, observer: CompactionObserver, circuit: str = "") -> None:
        self.inner = inner
        self._observer = observer
        self._circuit = circuit  # which breaker `inner` is, for the circuit reports
        self._last_state = "closed"

    @property
    def name(self) -> str:
        return self.inner.name

    async def complete(self, request: SummaryRequest) -> str:
        started = time.perf_counter()
        ok = False
        try:
            result = await self.inner.complete(request)
            ok = True
            return result
        except Exception as exc:
            if getattr(exc, "code", None) == CIRCUIT_OPEN_CODE:
                started = -1.0  # refused without calling: not a summarizer call
            raise
        finally:
            if started >= 0:
                self._observer.on_summarizer_call(self.name, time.perf_counter() - started, ok)
            self._report_state()

    def dropped(self) -> None:
        """This breaker is forgotten: reported closed, so an open one does not linger in metrics."""
        if self._last_state != "closed":
            self._last_state = "closed"
            self._observer.on_circuit_state(self.name, "closed", self._circuit)

    def _report_state(self) -> None:
        state = getattr(self.inner, "state", None)
        if isinstance(state, str) and state != self._last_state:
            self._last_state = state
            self._observer.on_circuit_state(self.name, state, self._circuit)
