"""The recall tool loop on POST /v1/messages (`anthropic/...` entries): Anthropic seen as a chat transport.

proxy/recall/tool_loop.py speaks chat. `MessagesAsChat` turns each of its rounds into a Messages
body: the first round is the body forwarded without the loop (its system, turns and cache marks),
later rounds append the model's own reply turn (thinking, text and recall `tool_use` blocks, as the
model sent them) and one user turn of `tool_result` blocks carrying the recalled text. The recall
tools go next to the client's as Anthropic tool definitions. Each reply comes back to the loop as a
chat completion whose `usage` is Anthropic's, so the loop sums Anthropic usage field by field.
The client's reply is the last message carrying every round's blocks but the recall `tool_use`
ones (`client_message`): the same blocks a streaming client gets, so a reply that began with signed
thinking still does when the client sends it back (Anthropic wants thinking first in a turn that
carries tool_use while thinking is on).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from compaction import Message
from config.settings import LiteLLMParams, RecallSettings
from proxy.recall.transport import RecallUpstream
from proxy.upstream.openai import StreamingReply, UpstreamReply
from proxy.wire import anthropic as wire
from proxy.wire.anthropic_translate import plain
from proxy.wire.openai import compact_json

JSON = dict[str, Any]
Block = dict[str, Any]


class MessagesTransport(Protocol):
    """The provider's /v1/messages (proxy.upstream.anthropic.AnthropicUpstream)."""

    async def complete(self, params: LiteLLMParams, body: dict[str, Any],
                       api_key: str | None) -> UpstreamReply: ...

    async def open_stream(self, params: LiteLLMParams, body: dict[str, Any],
                          api_key: str | None) -> StreamingReply: ...


def anthropic_tools(schemas: Sequence[Mapping[str, Any]]) -> list[JSON]:
    """Chat function tools (the recall tools) as Anthropic tool definitions."""
    out = []
    for tool in schemas:
        fn = tool.get("function")
        if isinstance(fn, Mapping):
            out.append({"name": fn.get("name"), "description": fn.get("description") or "",
                        "input_schema": fn.get("parameters") or {"type": "object", "properties": {}}})
    return out


def is_recall_use(block: Any, settings: RecallSettings) -> bool:
    """A `tool_use` block calling one of the recall tools."""
    return (isinstance(block, Mapping) and block.get("type") == "tool_use"
            and str(block.get("name")) in (settings.search_tool_name, settings.expand_tool_name))


def recall_calls(content: Sequence[Any], settings: RecallSettings) -> list[JSON]:
    """The recall `tool_use` blocks of a reply as chat tool calls (what the loop executes)."""
    return [{"id": str(b.get("id")), "type": "function",
             "function": {"name": str(b.get("name")), "arguments": json.dumps(b.get("input") or {})}}
            for b in content if is_recall_use(b, settings)]


def as_completion(message: Mapping[str, Any]) -> JSON:
    """An Anthropic message as the chat completion the loop reads (its usage left Anthropic's)."""
    content = message.get("content")
    turn = plain(wire.assistant_turn(content if isinstance(content, list) else [])[0])
    finish = "tool_calls" if turn.get("tool_calls") else "stop"
    return {"id": message.get("id"), "object": "chat.completion", "usage": message.get("usage"),
            "choices": [{"index": 0, "message": turn, "finish_reason": finish}]}


def client_message(last: Mapping[str, Any], replies: Sequence[Sequence[Any]], usage: Any,
                   settings: RecallSettings) -> JSON:
    """The newest message with every round's blocks but the recall calls, its stop reason fixed,
    usage summed over the rounds."""
    content = [b for reply in replies for b in reply if not is_recall_use(b, settings)]
    out = {**last, "content": content}
    if out.get("stop_reason") == "tool_use" and not any(
            isinstance(b, dict) and b.get("type") == "tool_use" for b in content):
        out["stop_reason"] = "end_turn"
    if isinstance(usage, dict):
        out["usage"] = usage
    return out


async def complete(looped: RecallUpstream, recall: MessagesAsChat, params: LiteLLMParams, body: JSON,
                   api_key: str | None) -> UpstreamReply:
    """The loop over the chat `body`; the client's reply is the last message (`client_message`)."""
    reply = await looped.complete(params, body, api_key)
    final = client_message(recall.last, recall.replies, reply.data.get("usage"), recall.settings)
    return UpstreamReply(200, compact_json(final), final, reply.headers)


@dataclass
class MessagesAsChat:
    """An `Upstream` taking the loop's chat bodies to the provider's /v1/messages."""

    inner: MessagesTransport
    template: JSON  # the Messages body as forwarded without the loop
    head: Sequence[Message]  # the prepared messages `template` was built from
    rebuild: Callable[[list[Message]], JSON]  # a body for a head the loop's budget refitted
    settings: RecallSettings
    replies: list[list[Block]] = field(default_factory=list)  # each round's reply content
    last: JSON = field(default_factory=dict)  # the newest reply message

    def body_for(self, body: Mapping[str, Any], stream: bool) -> JSON:
        """The Messages body of one round of the loop's chat `body`."""
        messages = list(body.get("messages") or [])
        tail = sum(1 + len(recall_calls(c, self.settings)) for c in self.replies)
        head = messages[:len(messages) - tail]
        base = self.template if head == list(self.head) else self.rebuild(head)
        turns = [*base.get("messages", []), *self._round_turns(messages[len(head):])]
        out = {**base, "messages": turns, "stream": stream}
        ours = [t for t in anthropic_tools(body.get("tools") or [])
                if t["name"] in (self.settings.search_tool_name, self.settings.expand_tool_name)]
        tools = [*(self.template.get("tools") or []), *ours]  # the client's as it sent them, then ours
        if tools:
            out["tools"] = tools
        else:
            out.pop("tools", None)
            out.pop("tool_choice", None)
        return out

    def _round_turns(self, tail: list[Message]) -> list[JSON]:
        """The continued rounds as turns: the model's reply, then one user turn of tool results."""
        turns: list[JSON] = []
        at = 0
        for content in self.replies:
            calls = len(recall_calls(content, self.settings))
            results = tail[at + 1:at + 1 + calls]
            turns += [{"role": "assistant", "content": content},
                      {"role": "user", "content": [{"type": "tool_result",
                                                    "tool_use_id": str(m.get("tool_call_id")),
                                                    "content": str(m.get("content") or "")}
                                                   for m in results]}]
            at += 1 + calls
        return turns

    async def complete(self, params: LiteLLMParams, body: dict[str, Any],
                       api_key: str | None) -> UpstreamReply:
        reply = await self.inner.complete(params, self.body_for(body, stream=False), api_key)
        content = reply.data.get("content")
        self.replies.append(content if isinstance(content, list) else [])
        self.last = reply.data
        return UpstreamReply(reply.status, reply.raw, as_completion(reply.data), reply.headers)

    async def open_stream(self, params: LiteLLMParams, body: dict[str, Any],
                          api_key: str | None) -> StreamingReply:
        """One streamed round; its reply content is added by the caller once the round is read."""
        return await self.inner.open_stream(params, self.body_for(body, stream=True), api_key)

