"""A request body of any of the three APIs as the canonical conversation (messages and tools).

Used where bodies arrive without their route (`ctxproxy replay` of request logs): which API a body
belongs to is read from its shape, and ctxproxy's private round-trip keys are left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from compaction import OPAQUE_TEXT_FIELD, Message
from proxy.wire import anthropic, responses
from proxy.wire.anthropic_translate import chat_tools

Api = Literal["chat", "responses", "messages"]
PRIVATE_KEYS = (responses.ITEMS_KEY, responses.INSTRUCTIONS_KEY, anthropic.BLOCKS_KEY, anthropic.SYSTEM_KEY,
                OPAQUE_TEXT_FIELD)
ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})
CHAT_ONLY_ROLES = frozenset({"developer", "tool", "function"})  # `system` is in both APIs' messages


def is_request_body(value: Any) -> bool:
    """A chat, Responses or Messages request body (not a recorded conversation, which has an id)."""
    return (isinstance(value, Mapping) and "model" in value and "id" not in value and "meta" not in value
            and ("messages" in value or "input" in value))


def api_of(body: Mapping[str, Any]) -> Api:
    """Which API a body speaks: `input` is Responses; chat-only roles are chat; a top-level
    `system` or Anthropic blocks are Messages; plain user/assistant text reads the same in both."""
    if "input" in body:
        return "responses"
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    if any(m.get("role") in CHAT_ONLY_ROLES for m in messages):
        return "chat"
    blocks = [b for m in messages if isinstance(m.get("content"), list) for b in m["content"]]
    if "system" in body or any(isinstance(b, Mapping) and b.get("type") in ANTHROPIC_BLOCKS for b in blocks):
        return "messages"
    return "chat"


def plain(message: Mapping[str, Any]) -> Message:
    return {k: v for k, v in message.items() if k not in PRIVATE_KEYS}


def canonical(body: Mapping[str, Any]) -> tuple[list[Message], list[dict[str, Any]]]:
    """(messages, chat tools) of a body; InvalidRequestError when its messages are malformed."""
    api = api_of(body)
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    if api == "responses":
        items = responses.to_messages(responses.input_items(body), body.get("instructions"))
        return [plain(m) for m in items], [responses.chat_tool(t) for t in tools]
    if api == "messages":
        return [plain(m) for m in anthropic.to_messages(body)], chat_tools(tools)
    return [dict(m) for m in body.get("messages") or []], tools
