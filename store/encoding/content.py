"""Reading text, tool calls and media out of an OpenAI message, for the index and for expand."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from store.models import Message

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
    """The text of a message's content: a string, or its text parts joined by newlines (no media)."""
    return _joined(m.get("content"), part_text)


def _joined(content: Any, read: Callable[[Mapping[str, Any]], str | None]) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [read(p) for p in content if isinstance(p, Mapping)]
        return "\n".join(t for t in texts if t)
    return ""


def _any_part_text(part: Mapping[str, Any]) -> str:
    """Text parts as their text; media as `[type uri]`; anything else as `[type]`."""
    text = part_text(part)
    if text is not None:
        return text
    uri = _media_uri(dict(part))
    kind = str(part.get("type") or "part")
    return f"[{kind} {_abbreviate(uri)}]" if uri else f"[{kind}]"


def tool_calls(m: Mapping[str, Any]) -> list[dict[str, Any]]:
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


def message_text(m: Mapping[str, Any]) -> str:
    """The one text of a message, the same for the search index, the inspector, the summarizer
    prompts and the verifier: content (every part type) then tool calls as `name(arguments)`."""
    pieces = [_joined(m.get("content"), _any_part_text)]
    for call in tool_calls(m):
        args = call["arguments"]
        args_text = args if isinstance(args, str) else ("" if args is None else json.dumps(args))
        pieces.append(f"{call['name'] or ''}({args_text})")
    return "\n".join(p for p in pieces if p)


def _abbreviate(uri: str) -> str:
    """Keep data: URIs from flooding a model's context; normal URLs pass unchanged."""
    if uri.startswith("data:") and len(uri) > _MAX_INLINE_URI:
        head = uri.split(",", 1)[0]
        return f"{head},...({len(uri) - len(head) - 1} characters omitted)"
    return uri


def _media_uri(part: Mapping[str, Any]) -> str | None:
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


def media_parts(m: Message) -> list[dict[str, Any]]:
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
