"""Log lines of compaction steps carry no conversation text: rejected facts are only counted."""

from __future__ import annotations

import io
import json

from proxy.observability.logging import make_logger
from proxy.observability.metrics import Metrics
from proxy.observability.observer import ProxyObserver, step_fields
from store.models import CompactionEvent

FACT = "Osprey7Dune"


def test_step_fields_count_rejected_facts() -> None:
    event = CompactionEvent("conv_1", "threshold", "leaf", "normal", "rejected", "m",
                            verification="failed", rejected_facts=(FACT, "1234"))
    fields = step_fields(event)
    assert fields["rejected_facts"] == 2
    assert FACT not in json.dumps(fields)


def test_level_rejected_line_counts_rejected_facts() -> None:
    stream = io.StringIO()
    observer = ProxyObserver(Metrics(store_size=lambda: 0.0), make_logger("info", "json", stream))
    observer.on_level_rejected("conv_1", "m", "normal", "unverified", None, (FACT,))
    line = json.loads(stream.getvalue().splitlines()[-1])
    assert line["event"] == "compaction.level_rejected" and line["rejected_facts"] == 1
    assert FACT not in stream.getvalue()


def test_a_step_over_tens_of_thousands_of_messages_logs_their_count_and_range() -> None:
    ids = tuple(range(100, 50_100))  # a collapsed import
    fields = step_fields(CompactionEvent("conv_1", "hard_budget", "leaf", "truncation", "committed", "m",
                                         source_message_ids=ids))
    assert fields["source_message_ids"] is None and fields["source_messages"] == 50_000
    assert fields["source_message_range"] == [100, 50_099] and len(json.dumps(fields)) < 2_000
