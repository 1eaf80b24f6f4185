"""The Responses API's typed SSE events: relayed one by one, the final response kept for storing.

Every event reaches the client as soon as it is complete. `response.completed` carries the whole
response (its `output` is what gets stored); `response.failed`, `response.incomplete` or an `error`
event mean nothing is stored. A stream that breaks ends with an `error` event in Responses' shape.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from config.errors import CtxProxyError, UpstreamError
from proxy.wire.sse import Writer, event_data

TERMINAL = frozenset({"response.completed", "response.failed", "response.incomplete"})


@dataclass
class ResponsesOutcome:
    """How a relayed Responses stream ended."""

    response: dict[str, Any] | None = None  # the `response` of response.completed
    terminal: str | None = None  # the terminal event type seen, if any
    error: CtxProxyError | None = None
    events: int = 0

    @property
    def complete(self) -> bool:
        return self.terminal == "response.completed" and self.response is not None and self.error is None


def error_event(error: CtxProxyError, sequence: int) -> bytes:
    """An `error` event as the Responses API sends one."""
    data = {"type": "error", "code": error.code, "message": error.message, "param": error.param,
            "sequence_number": sequence}
    return b"event: error\ndata: " + json.dumps(data).encode() + b"\n\n"


async def relay(events: AsyncIterator[bytes], write: Writer) -> ResponsesOutcome:
    """Pass each event to `write` as it arrives and note how the response ended."""
    outcome = ResponsesOutcome()
    try:
        async for block in events:
            await write(block + b"\n\n")
            outcome.events += 1
            _absorb(block, outcome)
    except CtxProxyError as exc:
        outcome.error = exc
    if outcome.terminal is not None:  # ended by the provider (its own error event already relayed)
        return outcome
    if outcome.error is None:
        outcome.error = UpstreamError("upstream stream ended before response.completed")
    await write(error_event(outcome.error, outcome.events))
    return outcome


def _absorb(block: bytes, outcome: ResponsesOutcome) -> None:
    name, data = event_data(block)
    try:
        body = json.loads(data) if data else None
    except ValueError:
        return
    if not isinstance(body, dict):
        return
    kind = body.get("type") or name
    if kind == "error" or name == "error":
        outcome.error = UpstreamError("upstream reported an error mid-stream")
        outcome.terminal = "error"
    elif kind in TERMINAL:
        outcome.terminal = str(kind)
        response = body.get("response")
        outcome.response = response if isinstance(response, dict) else None
