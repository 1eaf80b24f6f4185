"""The recall tool loop on POST /v1/responses: the Responses upstream seen as a chat transport.

proxy/recall/tool_loop.py speaks chat; `ResponsesAsChat` turns each of its rounds into a Responses
request (items from the canonical messages, flat tools) and each Response into a chat completion,
keeping the last Response, from which the client's reply is built without the recall calls.
A streaming request's rounds are opened and rewritten by proxy/recall/responses_stream.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from config.settings import LiteLLMParams, RecallSettings
from proxy.upstream.openai import OpenAIUpstream, StreamingReply, UpstreamReply
from proxy.wire import responses as wire

JSON = dict[str, Any]


@dataclass
class ResponsesAsChat:
    """An `Upstream` taking the loop's chat bodies to the provider's /responses."""

    inner: OpenAIUpstream
    template: JSON  # the Responses body as forwarded without the loop (model, options, ...)
    settings: RecallSettings = field(default_factory=RecallSettings)  # the recall tools' names
    last: JSON = field(default_factory=dict)  # the newest Response

    def body_for(self, body: dict[str, Any]) -> JSON:
        """The Responses body of one round of the loop's chat `body`."""
        instructions, items = wire.from_messages(body.get("messages") or [])
        out = {**self.template, "input": items, "tools": [wire.flat_tool(t) for t in body.get("tools") or []]}
        out.pop("instructions", None)
        if instructions is not None:
            out["instructions"] = instructions
        if not out["tools"]:
            for key in ("tools", "tool_choice", "parallel_tool_calls"):
                out.pop(key, None)
        return out

    async def complete(self, params: LiteLLMParams, body: dict[str, Any],
                       api_key: str | None) -> UpstreamReply:
        reply = await self.inner.complete(params, self.body_for(body), api_key)
        self.last = reply.data
        return UpstreamReply(reply.status, reply.raw, wire.chat_completion(reply.data), reply.headers)

    async def open_stream(self, params: LiteLLMParams, body: dict[str, Any],
                          api_key: str | None) -> StreamingReply:
        """One streamed round (the caller reads and rewrites its events)."""
        return await self.inner.open_stream(params, {**self.body_for(body), "stream": True}, api_key)


def is_recall_call(item: Any, settings: RecallSettings) -> bool:
    """A `function_call` output item calling one of the recall tools."""
    return (isinstance(item, dict) and item.get("type") == "function_call"
            and str(item.get("name")) in (settings.search_tool_name, settings.expand_tool_name))


def without_recall_tools(response: JSON, settings: RecallSettings) -> JSON:
    """A Response object without our tools in the `tools` it echoes (the client never offered them)."""
    tools = response.get("tools")
    if not isinstance(tools, list):
        return response
    names = (settings.search_tool_name, settings.expand_tool_name)
    return {**response, "tools": [t for t in tools if not (isinstance(t, dict) and t.get("name") in names)]}


def client_response(last: JSON, usage: Any, settings: RecallSettings) -> JSON:
    """The newest Response without recall calls or tools, usage summed over the loop's rounds."""
    output = [i for i in last.get("output") or [] if not is_recall_call(i, settings)]
    out = {**without_recall_tools(last, settings), "output": output}
    if isinstance(usage, dict):
        out["usage"] = usage
    return out
