"""Anthropic's Messages stream: every event relayed as it arrives, the reply's blocks assembled.

`message_start` carries the message (and its input usage: cache reads), `content_block_*` events
build the content blocks (text, tool_use input JSON, thinking with its signature), `message_stop`
ends it. An `error` event, or a stream that breaks before `message_stop`, stores nothing; a break
is reported to the client as an `error` event in Anthropic's shape.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from config.errors import CtxProxyError, UpstreamError
from proxy.wire.sse import Writer, event_data

JSON = dict[str, Any]
# delta type -> the block field it extends
DELTA_FIELDS = {"text_delta": ("text", "text"), "thinking_delta": ("thinking", "thinking"),
                "input_json_delta": ("partial_json", "partial_json")}


@dataclass
class MessageAssembler:
    """The assistant message rebuilt from the stream's events."""

    message: JSON | None = None
    blocks: dict[int, JSON] = field(default_factory=dict)
    usage: JSON = field(default_factory=dict)

    def feed(self, event: JSON) -> None:
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            self.message = event["message"]
            self.usage.update(event["message"].get("usage") or {})
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            self.blocks[int(event.get("index") or 0)] = dict(event["content_block"])
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            self._delta(self.blocks.setdefault(int(event.get("index") or 0), {}), event["delta"])
        elif kind == "message_delta":
            self.usage.update(event.get("usage") or {})

    @staticmethod
    def _delta(block: JSON, delta: JSON) -> None:
        kind = str(delta.get("type"))
        if kind == "signature_delta":
            block["signature"] = block.get("signature", "") + str(delta.get("signature") or "")
        elif kind in DELTA_FIELDS:
            source, target = DELTA_FIELDS[kind]
            block[target] = block.get(target, "") + str(delta.get(source) or "")

    def content(self) -> list[JSON]:
        """The content blocks in index order; tool_use inputs parsed from their JSON fragments."""
        out = []
        for index in sorted(self.blocks):
            block = dict(self.blocks[index])
            partial = block.pop("partial_json", None)
            if block.get("type") in ("tool_use", "server_tool_use") and partial is not None:
                block["input"] = json.loads(partial) if partial.strip() else {}
            out.append(block)
        return out


@dataclass
class MessagesOutcome:
    assembler: MessageAssembler = field(default_factory=MessageAssembler)
    stopped: bool = False  # message_stop seen
    error: CtxProxyError | None = None
    provider_error: bool = False  # the provider's own error event (already relayed)

    @property
    def complete(self) -> bool:
        return self.stopped and self.error is None


def error_event(error: CtxProxyError, error_type: str) -> bytes:
    data = {"type": "error", "error": {"type": error_type, "message": error.message}}
    return b"event: error\ndata: " + json.dumps(data).encode() + b"\n\n"


async def relay(events: AsyncIterator[bytes], write: Writer) -> MessagesOutcome:
    """Pass each event to `write` as it arrives; assemble the reply; report how it ended."""
    outcome = MessagesOutcome()
    try:
        async for block in events:
            await write(block + b"\n\n")
            _absorb(block, outcome)
    except CtxProxyError as exc:
        outcome.error = exc
    if outcome.stopped or outcome.provider_error:
        return outcome
    outcome.error = outcome.error or UpstreamError("upstream stream ended before message_stop")
    await write(error_event(outcome.error, "api_error"))
    return outcome


def _absorb(block: bytes, outcome: MessagesOutcome) -> None:
    name, data = event_data(block)
    try:
        event = json.loads(data) if data else None
    except ValueError:
        return
    if not isinstance(event, dict):
        return
    kind = event.get("type") or name
    if kind == "error":
        outcome.error, outcome.provider_error = UpstreamError("upstream reported an error mid-stream"), True
    elif kind == "message_stop":
        outcome.stopped = True
    else:
        try:
            outcome.assembler.feed(event)
        except (TypeError, ValueError) as exc:  # an event of unexpected shape: relayed, not stored
            outcome.error = UpstreamError(f"could not assemble the reply: {type(exc).__name__}")
