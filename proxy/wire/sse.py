"""Server-sent events: incremental parsing, unbuffered relay, and reply assembly.

The relay writes every upstream event to the client as soon as it is complete, before reading the
next one, while an assembler rebuilds the assistant message (content, refusal, tool calls by index)
so the engine can store it. A stream that breaks (reset, timeout, EOF without `[DONE]`) ends with
an SSE `error` event, never a silent cut; nothing is stored for a broken reply.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from compaction import Message
from config.errors import CtxProxyError, UpstreamError
from proxy.wire.openai import merge_tool_call, new_tool_call, tool_call_index

DONE = b"[DONE]"
Writer = Callable[[bytes], Awaitable[None]]


class SSEParser:
    r"""Split a byte stream into complete SSE event blocks (without the blank-line separator).

    Line endings are normalised to `\n` chunk by chunk: `\r\n`, and a lone `\r` too (the SSE spec
    allows all three), so a `\r`-only stream is relayed event by event, never held until EOF. A
    chunk ending in `\r` is normalised at once; a `\n` opening the next chunk then completes that
    `\r\n` and is dropped.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._after_cr = False

    def feed(self, chunk: bytes) -> list[bytes]:
        if not chunk:
            return []
        if self._after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._after_cr = chunk.endswith(b"\r")
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *events, self._buffer = (self._buffer + chunk).split(b"\n\n")
        return [e for e in events if e.strip()]

    def tail(self) -> bytes:
        """Whatever was left unterminated at end of stream."""
        return self._buffer.strip()


def event_data(event: bytes) -> tuple[str | None, bytes]:
    """(event name, joined `data:` payload) of one SSE block; one space after the colon is dropped."""
    name: str | None = None
    parts: list[bytes] = []
    for line in event.split(b"\n"):
        field_name, _, value = line.partition(b":")
        value = value[1:] if value.startswith(b" ") else value
        if field_name == b"data":
            parts.append(value)
        elif field_name == b"event":
            name = value.strip().decode("utf-8", "replace")
    return name, b"\n".join(parts)


@dataclass(frozen=True)
class Event:
    """What one SSE block means to a reader of chat.completion.chunk streams."""

    kind: Literal["done", "error", "chunk", "other"]
    body: dict[str, Any] | None = None  # the chunk, or an in-band error's JSON object
    data: bytes = b""


def classify(block: bytes) -> Event:
    """`[DONE]`; an in-band error (an `error` event whatever its data, or a JSON object carrying
    `error` without `choices`); a chunk object; or anything else (comments, non-JSON data)."""
    name, data = event_data(block)
    if data.strip() == DONE:
        return Event("done", data=data)
    try:
        parsed = json.loads(data) if data else None
    except ValueError:
        parsed = None
    body = parsed if isinstance(parsed, dict) else None
    if name == "error" or (body is not None and "error" in body and "choices" not in body):
        return Event("error", body, data)
    return Event("chunk", body, data) if body is not None else Event("other", data=data)


def error_event(error: CtxProxyError) -> bytes:
    """An SSE `error` event in OpenAI's error shape (the openai SDK raises APIError on it)."""
    return b"event: error\ndata: " + json.dumps(error.to_body()).encode() + b"\n\n"


@dataclass
class ReplyAssembler:
    """Rebuild the assistant message of choice 0 from chat.completion.chunk deltas."""

    role: str = "assistant"
    content: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None

    def feed(self, chunk: dict[str, Any]) -> None:
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._feed_delta(choice.get("delta") or {})
                self.finish_reason = choice.get("finish_reason") or self.finish_reason

    def _feed_delta(self, delta: dict[str, Any]) -> None:
        if isinstance(delta.get("role"), str):
            self.role = delta["role"]
        if isinstance(delta.get("content"), str):
            self.content.append(delta["content"])
        if isinstance(delta.get("refusal"), str):
            self.refusal.append(delta["refusal"])
        for call in delta.get("tool_calls") or []:
            if isinstance(call, dict):
                self._feed_tool_call(call)

    def _feed_tool_call(self, call: dict[str, Any]) -> None:
        merge_tool_call(self.tool_calls.setdefault(tool_call_index(call), new_tool_call()), call)

    def message(self) -> Message:
        """The assembled assistant message, in the non-streaming response's shape."""
        message: Message = {"role": self.role, "content": "".join(self.content) or None}
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        return message

    @property
    def completion_tokens(self) -> int | None:
        value = (self.usage or {}).get("completion_tokens")
        return value if isinstance(value, int) else None


@dataclass
class RelayOutcome:
    """How a relayed stream ended: the assembled reply when complete, the error otherwise."""

    assembler: ReplyAssembler
    complete: bool = False
    error: CtxProxyError | None = None
    storable: bool = True  # False when a chunk could not be assembled (the reply is not stored)


async def relay(events: AsyncIterator[bytes], write: Writer) -> RelayOutcome:
    """Pass each event block to `write` as it arrives; assemble the reply; report how it ended.

    Upstream failures raised by `events` (already CtxProxyErrors, see proxy/upstream/openai.py) end the
    stream with an `error` event. Client-side write failures propagate to the caller.
    """
    outcome = RelayOutcome(ReplyAssembler())
    try:
        async for block in events:
            await write(block + b"\n\n")
            if _absorb(block, outcome):
                return outcome
        if outcome.error is not None:  # the provider's own in-band error was already relayed
            return outcome
        outcome.error = UpstreamError("upstream stream ended before [DONE]")
    except CtxProxyError as exc:
        outcome.error = exc
    await write(error_event(outcome.error))
    return outcome


def _absorb(block: bytes, outcome: RelayOutcome) -> bool:
    """Feed one event to the assembler; True when it was the terminal `[DONE]`.

    Every block was already passed to the client: an in-band error only means nothing is stored,
    and a block that is not a chunk object is skipped by assembly alone.
    """
    event = classify(block)
    if event.kind == "done":
        outcome.complete = outcome.error is None
        return True
    if event.kind == "error":
        outcome.error = UpstreamError("upstream reported an error mid-stream")
    elif event.kind == "chunk" and event.body is not None:
        _assemble(event.body, outcome)
    return False


def _assemble(chunk: dict[str, Any], outcome: RelayOutcome) -> None:
    """Best effort: a chunk of unexpected shape marks the reply unstorable, never breaks the relay."""
    try:
        outcome.assembler.feed(chunk)
    except (TypeError, ValueError, KeyError, AttributeError):
        outcome.storable = False
