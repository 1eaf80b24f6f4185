"""The proxy's CompactionObserver: every compaction step as one structlog line plus Prometheus metrics.

compaction/ reports through the `compaction.observer.CompactionObserver` seam; this class turns the
reports into a `compaction.step` JSON event (the provenance also recorded in the store) and the
counters in proxy/observability/metrics.py. Values pass the logger's redaction processor like
every other line.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from proxy.observability.metrics import Metrics
from store.models import CompactionEvent

STEP_EVENT = "compaction.step"
MAX_LOGGED_SOURCES = 256  # a step naming more source messages logs their count and range only


def step_fields(event: CompactionEvent) -> dict[str, Any]:
    """The `compaction.step` line's fields: the provenance record (ids and counts, no conversation
    text), plus a few derived ones."""
    fields = asdict(event)
    fields["event_id"] = fields.pop("id")
    fields["compaction_level"] = fields.pop("level")  # `level` is the log level's key
    fields.pop("created_at", None)
    fields["tokens_saved"] = max(0, event.tokens_before - event.tokens_after)
    messages = event.source_message_ids
    fields["source_message_range"] = [min(messages), max(messages)] if messages else None
    fields["source_messages"] = len(messages)
    if len(messages) > MAX_LOGGED_SOURCES:  # a collapsed import names 50,000: the store keeps them all
        fields["source_message_ids"] = None
    # Rejected facts are conversation text: counted here, kept only in the store (which a delete erases).
    fields["rejected_facts"] = len(fields.pop("rejected_facts"))
    return fields


class ProxyObserver:
    """Implements compaction.observer.CompactionObserver with the app's logger and metrics."""

    def __init__(self, metrics: Metrics, logger: Any) -> None:
        self._metrics = metrics
        self._log = logger

    def on_step(self, event: CompactionEvent) -> None:
        self._metrics.observe_compaction(event)
        log = self._log.info if event.outcome == "committed" else self._log.warning
        log(STEP_EVENT, **step_fields(event))

    def on_summarizer_call(self, model: str, seconds: float, ok: bool) -> None:
        self._metrics.observe_summarizer(seconds, ok)

    def on_circuit_state(self, name: str, state: str, circuit: str = "") -> None:
        self._metrics.set_circuit_state(state, circuit or name)
        self._log.warning("summarizer.circuit", summarizer=name, state=state)

    def on_level_rejected(self, conversation_id: str, model: str, level: str, reason: str,
                          error: str | None, rejected_facts: tuple[str, ...]) -> None:
        self._metrics.observe_level_rejected(reason)
        self._log.warning("compaction.level_rejected", conversation_id=conversation_id,
                          summarizer_model=model, level=level, reason=reason, error=error,
                          rejected_facts=len(rejected_facts))

    def on_background_error(self, conversation_id: str, attempt: int, error: str) -> None:
        self._log.warning("compaction.background_failed", conversation_id=conversation_id,
                          attempt=attempt, error=error)

    def on_early_mismatch(self, conversation_id: str, fields: tuple[str, ...]) -> None:
        self._metrics.early_mismatches.inc()
        self._log.warning("early_forward_mismatch", conversation_id=conversation_id, fields=list(fields))
