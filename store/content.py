"""Reading text, tool calls and media out of an OpenAI message, for the index and for expand."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TOOL_RESULT_NOTE = "tool result payload omitted on purpose; re-run the tool if you need it"
_MAX_INLINE_URI = 256  # data: URIs longer than this are abbreviated in expand output


TEXT_PART_TYPES = ("text", "input_text", "output_text")


def part_text(part: Mapping[str, Any]) -> str | None:
    """The text a content part carries (None for media and unknown parts)."""
    kind = part.get("type")
    if kind in TEXT_PART_TYPES:
        return str(part.get("text") or "")
    if kind == "refusal":
        return str(part.get("refusal") or part.get("text") or "")
    return None


def content_text(m: Mapping[str, Any]) -> str:
    """The text of a message's content: a string, or its text parts joined by newlines."""
    content = m.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [part_text(p) for p in content if isinstance(p, Mapping)]
        return "\n".join(t for t in texts if t)
    return ""


def tool_calls(m: dict[str, Any]) -> list[dict[str, Any]]:
    """An assistant message's calls as {id, name, arguments} (legacy function_call included)."""
    out: list[dict[str, Any]] = []
    for call in m.get("tool_calls") or []:
        if isinstance(call, dict):
            raw = call.get("function")
            fn: dict[str, Any] = raw if isinstance(raw, dict) else {}
            out.append({"id": call.get("id"), "name": fn.get("name"), "arguments": fn.get("arguments")})
    legacy = m.get("function_call")
    if isinstance(legacy, dict):
        out.append({"id": None, "name": legacy.get("name"), "arguments": legacy.get("arguments")})
    return out


def searchable_text(m: dict[str, Any]) -> str:
    """What the full-text index holds: content plus tool-call names and arguments."""
    pieces = [content_text(m)]
    for call in tool_calls(m):
        pieces.append(f"{call['name'] or ''} {call['arguments'] or ''}".strip())
    return "\n".join(p for p in pieces if p)


def _abbreviate(uri: str) -> str:
    """Keep data: URIs from flooding a model's context; normal URLs pass unchanged."""
    if uri.startswith("data:") and len(uri) > _MAX_INLINE_URI:
        head = uri.split(",", 1)[0]
        return f"{head},...({len(uri) - len(head) - 1} characters omitted)"
    return uri


def _media_uri(part: dict[str, Any]) -> str | None:
    kind = part.get("type")
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        return str(url) if url else None
    if kind == "input_audio":
        audio = part.get("input_audio") or {}
        return f"data:audio/{audio.get('format') or 'wav'};base64,{audio.get('data') or ''}"
    if kind == "file":
        file = part.get("file") or {}
        if file.get("file_id"):
            return f"file:{file['file_id']}"
        return str(file.get("file_data")) if file.get("file_data") else None
    return None


def media_parts(m: dict[str, Any]) -> list[dict[str, Any]]:
    """Media referenced by content parts, as {type: 'media', media_type, uri}."""
    content = m.get("content")
    if not isinstance(content, list):
        return []
    out: list[dict[str, Any]] = []
    for part in content:
        uri = _media_uri(part) if isinstance(part, dict) else None
        if uri:
            out.append({"type": "media", "media_type": part["type"], "uri": _abbreviate(uri)})
    return out
