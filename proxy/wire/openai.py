"""OpenAI wire-format helpers shared by the transports, the SSE relay and the recall tool loop."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from compaction import Message
from store.encoding.fastjson import dumps_compact


class EncodedMessages(list[Message]):
    """A body's `messages` whose compact JSON is known already (the client's own bytes, when they are
    forwarded as received): `compact_json` writes those bytes instead of encoding the list again.
    Built once per forwarded body and never changed (the recall loop copies it into a plain list)."""

    __slots__ = ("encoded",)

    def __init__(self, messages: Sequence[Message], encoded: bytes) -> None:
        super().__init__(messages)
        self.encoded = encoded


class EncodedBody(dict[str, Any]):
    """A request body forwarded as the client sent it: `compact_json` writes the client's own bytes
    instead of encoding it again (a resent 100k-token history is about 400 KB of JSON).
    Built once per forwarded body and never changed (a copy of it is a plain dict, encoded anew)."""

    __slots__ = ("encoded",)

    def __init__(self, body: Mapping[str, Any], encoded: bytes) -> None:
        super().__init__(body)
        self.encoded = encoded


def compact_json(obj: Any) -> bytes:
    """JSON as providers and clients get it from us: UTF-8, no spaces, non-ASCII kept."""
    if obj.__class__ is EncodedBody:
        return obj.encoded
    messages = obj.get("messages") if obj.__class__ is dict else None
    if not isinstance(messages, EncodedMessages):
        return dumps_compact(obj)
    rest = dumps_compact({k: v for k, v in obj.items() if k != "messages"})
    return b"".join((rest[:-1], b"," if len(rest) > 2 else b"", b'"messages":', messages.encoded, b"}"))


def first_message(data: Mapping[str, Any]) -> Message | None:
    """`choices[0].message` of a chat completion, None when the reply has no such object."""
    choices = data.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        return message if isinstance(message, dict) else None
    return None


def tool_call_index(delta: Mapping[str, Any]) -> int:
    """The `index` of a streamed tool-call delta; a missing or null index means the first call."""
    return int(delta.get("index") or 0)


def new_tool_call() -> dict[str, Any]:
    return {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}


def merge_tool_call(slot: dict[str, Any], delta: Mapping[str, Any]) -> None:
    """Fold one streamed tool-call delta into `slot` (from new_tool_call): the first id wins,
    name and argument fragments are concatenated in arrival order."""
    slot["id"] = slot["id"] or delta.get("id") or ""
    if delta.get("type"):
        slot["type"] = delta["type"]
    function = delta.get("function") or {}
    if function.get("name"):
        slot["function"]["name"] += function["name"]
    if function.get("arguments"):
        slot["function"]["arguments"] += function["arguments"]
