"""OpenAI Responses `input` items <-> the engine's canonical form (OpenAI chat messages).

Each canonical message carries the items it came from under ITEMS_KEY, so an item the engine left
alone goes back byte-identical (reasoning with its encrypted content, item ids, statuses, unknown
item types). A run of assistant-side items (assistant text, calls, reasoning and other opaque items)
becomes ONE assistant message, exactly as a reply's `output` does, so conversation identity holds
across turns. Tool calls and their outputs become tool rounds the engine keeps together.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from compaction import OPAQUE_TEXT_FIELD, Message, SizedLru
from config.errors import InvalidRequestError

ITEMS_KEY = "ctxproxy_items"  # the original items of a canonical message (never sent as such)
INSTRUCTIONS_KEY = "ctxproxy_instructions"  # marks the system message made of `instructions`
Side = Literal["assistant", "result", "message"]
Item = dict[str, Any]


MAX_TRANSLATED = 16_384  # canonical messages kept by `Translations`
TRANSLATED_BYTES = 160  # what one kept message costs beyond what the resend caches hold anyway


class Translations:
    """The canonical message made of the same input items before: a resent body's shared items are
    the previous parse's own dicts (proxy/server/resent_body.py), so they give the previous
    request's own canonical dicts, and the engine can take the resend on the HTTP loop
    (compaction/resend/previous.py `extension`). A message depends on its items alone. Bounded in
    messages, least recently used first out; `instructions` are kept per scope (the tenant)."""

    def __init__(self, max_messages: int = MAX_TRANSLATED, name: str | None = None) -> None:
        self._made: SizedLru[int, tuple[tuple[Item, ...], Message]] = SizedLru(
            max_messages, name=name, unit_bytes=TRANSLATED_BYTES)
        self._instructions: SizedLru[tuple[str, str], Message] = SizedLru(64)

    def message(self, items: Sequence[Item]) -> Message:
        """The canonical message of `items`: one user/system/result item, or an assistant run."""
        held = self.known(items)
        if held is not None:
            return held
        made = _made(items)
        self._made.put(id(items[0]), (tuple(items), made), 1)
        return made

    def known(self, items: Sequence[Item]) -> Message | None:
        """The canonical message made of these very items before, else None (nothing is made)."""
        held = self._made.get(id(items[0])) if items else None
        if held is not None and len(held[0]) == len(items) and all(map(operator.is_, held[0], items)):
            return held[1]
        return None

    def instructions(self, text: str, scope: str) -> Message:
        found = self._instructions.get((scope, text))
        if found is None:
            found = _instructions(text)
            self._instructions.put((scope, text), found, 1)
        return found

    @property
    def held_bytes(self) -> int:
        return self._made.held_bytes

    @property
    def max_bytes(self) -> int:
        return self._made.max_bytes


def to_messages(items: Sequence[Any], instructions: Any = None, translations: Translations | None = None,
                scope: str = "") -> list[Message]:
    """The canonical messages of a request's `input` (and `instructions`, as the first system one);
    `translations`: those made before, reused (the same dicts) for the same items."""
    out: list[Message] = []
    if isinstance(instructions, str) and instructions:
        out.append(translations.instructions(instructions, scope) if translations is not None
                   else _instructions(instructions))
    made = translations.message if translations is not None else _made
    run: list[Item] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidRequestError(f"Invalid input[{index}]: each input item must be an object",
                                      param=f"input[{index}]", code="invalid_value")
        if side(item) == "assistant":
            run.append(item)
            continue
        if run:
            out.append(made(run))
            run = []
        out.append(made([item]))
    if run:
        out.append(made(run))
    return out


def _instructions(text: str) -> Message:
    return {"role": "system", "content": text, INSTRUCTIONS_KEY: True}


def _made(items: Sequence[Item]) -> Message:
    """The canonical message of one user/system/result item, or of a run of assistant-side items."""
    first = items[0]
    if side(first) == "assistant":
        return assistant_message(items)
    return _result(first) if side(first) == "result" else _message(first)


def input_items(body: Mapping[str, Any]) -> list[Any]:
    """`input` as a list of items: a bare string is one user message."""
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    if isinstance(raw, list):
        return raw
    raise InvalidRequestError("input must be a string or an array of input items", param="input",
                              code="invalid_value")


def side(item: Mapping[str, Any]) -> Side:
    """Which canonical message an item belongs to: an assistant run, a tool result, or its own."""
    kind = str(item.get("type") or "message")
    if kind.endswith("_call_output") and "call_id" in item:
        return "result"
    if kind == "message" and item.get("role") in ("user", "system", "developer"):
        return "message"
    return "assistant"  # assistant text, calls, reasoning and every opaque item


def assistant_message(run: Sequence[Item]) -> Message:
    """One assistant message from a run of assistant-side items (or a reply's `output`)."""
    texts = [_text(i.get("content")) for i in run if i.get("type", "message") == "message"]
    calls = [_tool_call(i) for i in run if _is_call(i)]
    message: Message = {"role": "assistant", "content": "\n".join(t for t in texts if t) or None}
    if calls:
        message["tool_calls"] = calls
    opaque = [i for i in run if i.get("type", "message") != "message" and not _is_call(i)]
    if opaque:  # reasoning and other items: sent to the provider, so counted in the budget
        message[OPAQUE_TEXT_FIELD] = json.dumps(opaque, ensure_ascii=False, separators=(",", ":"))
    message[ITEMS_KEY] = list(run)
    return message


def _is_call(item: Mapping[str, Any]) -> bool:
    kind = str(item.get("type") or "")
    return kind.endswith("_call") and isinstance(item.get("call_id"), str) and bool(item["call_id"])


def _tool_call(item: Mapping[str, Any]) -> dict[str, Any]:
    """A call item as a chat tool call: function calls as they are, other calls by type and input."""
    arguments = item.get("arguments")
    if not isinstance(arguments, str):
        payload = item.get("input", item.get("action", {}))
        arguments = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    name = item.get("name") if isinstance(item.get("name"), str) and item.get("name") else item["type"]
    return {"id": item["call_id"], "type": "function", "function": {"name": name, "arguments": arguments}}


def _result(item: Item) -> Message:
    return {"role": "tool", "tool_call_id": item["call_id"], "content": _text(item.get("output")),
            ITEMS_KEY: [item]}


def _message(item: Item) -> Message:
    role = item["role"]
    content = item.get("content")
    images = [_image(p) for p in content if _is_image(p)] if isinstance(content, list) else []
    text = _text(content)
    body: str | list[dict[str, Any]] = text
    if role == "user" and images:
        body = ([{"type": "text", "text": text}] if text else []) + images
    return {"role": role, "content": body, ITEMS_KEY: [item]}


def _is_image(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "input_image"


def _image(part: Mapping[str, Any]) -> dict[str, Any]:
    url = part.get("image_url") or f"file:{part.get('file_id', '')}"
    return {"type": "image_url", "image_url": {"url": str(url)}}


def _text(content: Any) -> str:
    """The text of a content value: a string, or the text/refusal parts of a list, joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    pieces = [p.get("text") or p.get("refusal") for p in content if isinstance(p, dict)]
    return "\n".join(p for p in pieces if isinstance(p, str) and p)


def from_messages(messages: Sequence[Mapping[str, Any]],
                  translations: Translations | None = None) -> tuple[str | None, list[Item]]:
    """(instructions, input items) of a forwarded canonical list: untouched messages give back their
    own items verbatim; engine-made ones (summaries, anchors, pointers) become message items.
    `translations`: those `to_messages` made, so a message forwarded as made is known untouched
    without translating its items again."""
    instructions: str | None = None
    items: list[Item] = []
    for message in messages:
        if message.get(INSTRUCTIONS_KEY):
            instructions = _text(message.get("content"))
            continue
        own = message.get(ITEMS_KEY)
        if not isinstance(own, list):
            items.extend(_fresh(message))
        elif (translations is not None and translations.known(own) is message) or _unchanged(message, own):
            items.extend(own)
        else:
            items.extend(_edited(message, own))
    return instructions, items


def _fresh(message: Mapping[str, Any]) -> list[Item]:
    """Items of a message made by ctxproxy (summaries, anchors, the recall loop's calls and results)."""
    role = str(message.get("role") or "system")
    text = _text(message.get("content"))
    if role == "tool":
        return [{"type": "function_call_output", "call_id": str(message.get("tool_call_id")),
                 "output": text}]
    items: list[Item] = []
    if text or role != "assistant":
        items.append({"type": "message", "role": role, "content": text})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        items.append({"type": "function_call", "call_id": str(call.get("id")),
                      "name": str(function.get("name")), "arguments": str(function.get("arguments") or "")})
    return items


def chat_tool(tool: Item) -> Item:
    """A Responses function tool (flat) in chat's shape; other tools as they are."""
    if "function" in tool or tool.get("type") != "function":
        return tool
    return {"type": "function", "function": {k: v for k, v in tool.items() if k != "type"}}


def flat_tool(tool: Item) -> Item:
    """A chat function tool in the Responses shape (flat); other tools as they are."""
    function = tool.get("function")
    return {"type": "function", **function} if isinstance(function, dict) else tool


def chat_completion(response: Mapping[str, Any]) -> dict[str, Any]:
    """A Response as a chat completion (its output as one assistant message), for the recall loop."""
    output = response.get("output")
    items = [i for i in output if isinstance(i, dict)] if isinstance(output, list) else []
    message = assistant_message(items)
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {"id": response.get("id"), "object": "chat.completion", "usage": response.get("usage"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}]}


def _unchanged(message: Mapping[str, Any], own: list[Item]) -> bool:
    again = to_messages(own)
    return len(again) == 1 and again[0] == dict(message)


def _edited(message: Mapping[str, Any], own: list[Item]) -> list[Item]:
    """Items of a message the engine shortened (elision): its new text in place of the old."""
    text = _text(message.get("content"))
    if message.get("role") == "tool":
        return [{**own[0], "output": text}]
    out: list[Item] = []
    placed = False
    for item in own:
        if item.get("type", "message") == "message":
            if not placed:
                out.append({"type": "message", "role": item.get("role", "assistant"), "content": text})
                placed = True
            continue
        out.append(item)
    if not placed and text:
        out.insert(0, {"type": "message", "role": str(message.get("role")), "content": text})
    return out
