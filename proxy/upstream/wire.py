"""OpenAI wire-format helpers shared by the transports, the SSE relay and the recall tool loop."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from store.fastjson import dumps_compact


def compact_json(obj: Any) -> bytes:
    """JSON as providers and clients get it from us: UTF-8, no spaces, non-ASCII kept."""
    return dumps_compact(obj)


def first_message(data: Mapping[str, Any]) -> dict[str, Any] | None:
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
