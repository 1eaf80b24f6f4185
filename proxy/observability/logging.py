"""structlog, configured per app (no global state): JSON or console lines, secrets redacted.

Every event dict passes `redaction_processor` before rendering: credential-bearing keys are
dropped outright and every string value goes through compaction.summarize.redact.redact_obj. One canonical
`request` line per request is emitted by proxy/server/middleware.py from a RequestRecord.
"""

from __future__ import annotations

import logging as std_logging
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import Any, TextIO

import structlog
from structlog.typing import FilteringBoundLogger

from compaction import redact_obj

# Keys never logged, whatever their value looks like (compared case-insensitively).
DROPPED_KEYS = frozenset({"authorization", "api_key", "apikey", "x-api-key", "proxy-authorization",
                          "headers", "credentials"})


def redaction_processor(_logger: Any, _method: str,
                        event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Drop credential keys and redact secrets in every value of the event dict."""
    clean = {k: v for k, v in event.items() if k.lower() not in DROPPED_KEYS}
    redacted: MutableMapping[str, Any] = redact_obj(clean)
    return redacted


def make_logger(level: str = "info", fmt: str = "json",
                stream: TextIO | None = None) -> FilteringBoundLogger:
    """A structlog BoundLogger writing one line per event to `stream` (stdout by default)."""
    renderer: Any = (structlog.dev.ConsoleRenderer(colors=False) if fmt == "console"
                     else structlog.processors.JSONRenderer())
    numeric = std_logging.getLevelNamesMapping().get(level.upper(), std_logging.INFO)
    logger: FilteringBoundLogger = structlog.wrap_logger(
        structlog.PrintLogger(file=stream or sys.stdout),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            redaction_processor,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        cache_logger_on_first_use=True,
    )
    return logger


@dataclass
class RequestRecord:
    """Fields of the canonical `request` line; the handler fills what it learns along the way."""

    method: str
    path: str
    status: int = 0
    model: str | None = None
    tenant_id: str | None = None
    conversation_id: str | None = None
    tokens_received: int | None = None
    tokens_forwarded: int | None = None
    tokens_out: int | None = None
    cache_read_tokens: int | None = None  # prompt tokens the provider reports read from its cache
    prefix_tokens: int | None = None  # leading tokens shared with the previous forwarded request
    billed_input_tokens_estimate: int | None = None  # what was forwarded, cached prefix discounted
    full_history_billed_estimate: int | None = None  # had the whole received history been forwarded
    budget_unused_ratio: float | None = None  # share of the input budget the forwarded request left
    compacted: bool | None = None
    summarizer_wait: bool | None = None  # this turn waited on a synchronous summarizer call
    forced_truncation: bool | None = None
    compaction_steps: int | None = None  # synchronous steps this turn (each also logged)
    upstream_status: int | None = None
    latency_ms: float = 0.0
    overhead_ms: float | None = None
    stream: bool = False
    error_code: str | None = None

    def fields(self) -> dict[str, Any]:
        """Shallow copy (every field is a scalar; `asdict`'s deep copy costs ~0.1 ms a request)."""
        return {f.name: getattr(self, f.name) for f in dataclass_fields(self)}
