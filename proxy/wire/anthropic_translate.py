"""Messages requests for entries that do not speak Messages: the chat form out, the reply back.

The request's canonical (chat) form goes through the usual transports (the OpenAI fast path, or
litellm's translation for other providers); the chat completion comes back as an Anthropic
message, and for a streaming client as the Messages event sequence of that message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from compaction import OPAQUE_TEXT_FIELD, SYSTEM_ROLES, Message, group_messages
from proxy.wire.anthropic import BLOCKS_KEY, SYSTEM_KEY

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use",
                "function_call": "tool_use", "content_filter": "refusal"}
PRIVATE_KEYS = (BLOCKS_KEY, SYSTEM_KEY, OPAQUE_TEXT_FIELD)


def plain(message: Mapping[str, Any]) -> Message:
    """A canonical message without ctxproxy's private keys (what a chat provider may see)."""
    return {k: v for k, v in message.items() if k not in PRIVATE_KEYS}


def chat_tools(tools: Any) -> list[dict[str, Any]]:
    """Anthropic tool definitions as chat function tools (server tools by name only)."""
    out = []
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            function = {"name": tool["name"], "description": tool.get("description") or "",
                        "parameters": tool.get("input_schema") or {"type": "object", "properties": {}}}
            out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: Any) -> Any:
    if not isinstance(choice, dict):
        return None
    kind = choice.get("type")
    if kind == "tool":
        return {"type": "function", "function": {"name": choice.get("name")}}
    return {"auto": "auto", "any": "required", "none": "none"}.get(str(kind))


def chat_request(chat_body: dict[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
    """The prepared chat body without private keys, with the Messages sampling parameters mapped."""
    out = {**chat_body, "messages": rounds_unbroken([plain(m) for m in chat_body.get("messages") or []])}
    for key in ("temperature", "top_p"):
        if key in body:
            out[key] = body[key]
    if isinstance(body.get("stop_sequences"), list):
        out["stop"] = body["stop_sequences"]
    choice = _tool_choice(body.get("tool_choice"))
    if choice is not None:
        out["tool_choice"] = choice
    if not out.get("tools"):
        out.pop("tools", None)
    return out


def rounds_unbroken(messages: list[Message]) -> list[Message]:
    """System messages inside a tool round moved after its results: chat providers want each tool
    result right after the call (Anthropic clients put notes between them)."""
    out: list[Message] = []
    for group in group_messages(messages):
        members = messages[group.start:group.end]
        if group.kind == "tool_round":
            members = sorted(members, key=lambda m: m.get("role") in SYSTEM_ROLES)
        out += members
    return out


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def anthropic_message(completion: Mapping[str, Any], model: str) -> dict[str, Any]:
    """A chat completion as an Anthropic message (text block, then tool_use blocks)."""
    choices = completion.get("choices")
    choice = _obj(choices[0] if isinstance(choices, list) and choices else None)
    message = _obj(choice.get("message"))
    content: list[dict[str, Any]] = []
    if isinstance(message.get("content"), str) and message["content"]:
        content.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = {"_raw_arguments": function.get("arguments")}
        content.append({"type": "tool_use", "id": call.get("id"), "name": function.get("name"),
                        "input": arguments})
    usage = _obj(completion.get("usage"))
    details = _obj(usage.get("prompt_tokens_details"))
    return {"id": f"msg_{completion.get('id', 'ctxproxy')}", "type": "message", "role": "assistant",
            "model": model, "content": content,
            "stop_reason": STOP_REASONS.get(str(choice.get("finish_reason")), "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": usage.get("prompt_tokens", 0),
                      "output_tokens": usage.get("completion_tokens", 0),
                      "cache_read_input_tokens": details.get("cached_tokens", 0)}}


def _event(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def stream_events(message: Mapping[str, Any]) -> list[bytes]:
    """The Messages stream of a complete message: start, each block, delta with usage, stop."""
    start = {**message, "content": [], "stop_reason": None,
             "usage": {**message["usage"], "output_tokens": 0}}
    events = [_event({"type": "message_start", "message": start})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            delta: dict[str, Any] = {"type": "text_delta", "text": block["text"]}
        else:
            opened = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [_event({"type": "content_block_start", "index": index, "content_block": opened}),
                   _event({"type": "content_block_delta", "index": index, "delta": delta}),
                   _event({"type": "content_block_stop", "index": index})]
    events.append(_event({"type": "message_delta",
                          "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                          "usage": {"output_tokens": message["usage"]["output_tokens"]}}))
    events.append(_event({"type": "message_stop"}))
    return events
