"""The recall tool loop on a streaming POST /v1/responses: one typed event stream over every round.

Each round is one upstream stream (proxy/recall/responses.py builds its body); its events are
rewritten as they arrive: `response.created` / `in_progress` only from the first round, output
items of every round renumbered consecutively (`output_index`), recall `function_call` items and
their argument events withheld, and `sequence_number` counted over what the client gets. A round
that only called the recall tools ends without its `response.completed`: the loop answers the
calls and the next round continues. The one `response.completed` carries the last round's
response (its id, the one a `previous_response_id` chain can continue from) with `output` being
every item the client was streamed, in order, and usage summed over every round as the chat tool
loop sums it. The response objects events carry never list the recall tools.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from config.settings import LiteLLMParams
from proxy.recall.looped_stream import NoRounds, open_looped, relayed_round
from proxy.recall.responses import ResponsesAsChat, is_recall_call, without_recall_tools
from proxy.recall.tool_loop import ToolLoop, add_usage, call_name
from proxy.recall.transport import RecallUpstream
from proxy.upstream.openai import StreamingReply
from proxy.wire import responses as wire
from proxy.wire.sse import event_data

JSON = dict[str, Any]
OPENING = frozenset({"response.created", "response.in_progress", "response.queued"})


@dataclass
class _Carried:
    """What outlives one round: the client's next item index and event number, its items, usage."""

    next_index: int = 0
    sequence: int = 0
    items: list[JSON] = field(default_factory=list)
    usage: JSON | None = None
    rounds: int = 0


@dataclass
class ResponsesRound:
    """Rewrites one round's events for the client; keeps the round's final response."""

    recall: ResponsesAsChat
    offer: bool
    carried: _Carried
    routes: dict[int, int | None] = field(default_factory=dict)  # upstream output_index -> client's
    response: JSON | None = None  # the round's response.completed response
    first: bool = field(init=False)

    def __post_init__(self) -> None:
        self.first = self.carried.rounds == 0
        self.carried.rounds += 1

    def message(self) -> JSON:
        """The round's reply as one chat assistant message (its text and calls)."""
        return dict(wire.chat_completion(self.response or {})["choices"][0]["message"])

    def recall_calls(self) -> list[JSON]:
        """The round's recall calls, as chat tool calls (what the loop executes)."""
        calls = self.message().get("tool_calls") or []
        return [c for c in calls if _ours(c, self.recall)]

    def continues(self) -> bool:
        """The round completed asking only for our tools, and another round is allowed."""
        calls = self.message().get("tool_calls") or []
        return (self.offer and self.response is not None and bool(calls)
                and all(_ours(c, self.recall) for c in calls))

    def feed(self, block: bytes) -> bytes | None:
        """The block to forward (rewritten), or None to withhold it."""
        name, data = event_data(block)
        try:
            event = json.loads(data) if data else None
        except ValueError:
            return block
        if not isinstance(event, dict):
            return block
        kind = str(event.get("type") or name)
        if kind in OPENING and not self.first:
            return None
        if kind == "response.completed" and isinstance(event.get("response"), dict):
            return self._completed(event)
        if isinstance(event.get("response"), dict):
            event = {**event, "response": without_recall_tools(event["response"], self.recall.settings)}
        if isinstance(event.get("output_index"), int):
            route = self._route(event)
            if route is None:
                return None
            event = {**event, "output_index": route}
        return self._encode(kind, event)

    def _route(self, event: JSON) -> int | None:
        """The client's output_index for the event's item; None for a recall call's events."""
        index = int(event["output_index"])
        if index not in self.routes:
            hidden = is_recall_call(event.get("item"), self.recall.settings)
            self.routes[index] = None if hidden else self._next()
        return self.routes[index]

    def _next(self) -> int:
        self.carried.next_index += 1
        return self.carried.next_index - 1

    def _completed(self, event: JSON) -> bytes | None:
        """None for a round that continues; else the one response.completed, over every round."""
        self.response = event["response"]
        output = [i for i in self.response.get("output") or [] if not is_recall_call(
            i, self.recall.settings)]
        self.carried.items += output
        self.carried.usage = add_usage(self.carried.usage, self.response.get("usage"))
        if self.continues():
            return None
        final = {**without_recall_tools(self.response, self.recall.settings), "output": self.carried.items}
        if self.carried.usage is not None:
            final["usage"] = self.carried.usage
        return self._encode("response.completed", {**event, "response": final})

    def _encode(self, kind: str, event: JSON) -> bytes:
        if "sequence_number" in event:
            event = {**event, "sequence_number": self.carried.sequence}
        self.carried.sequence += 1
        return f"event: {kind}\ndata: {json.dumps(event)}".encode()


def _ours(call: JSON, recall: ResponsesAsChat) -> bool:
    settings = recall.settings
    return call_name(call) in (settings.search_tool_name, settings.expand_tool_name)


async def rounds(loop: ToolLoop, recall: ResponsesAsChat, params: LiteLLMParams, body: JSON,
                 api_key: str | None, headers: dict[str, str]) -> AsyncGenerator[bytes, None]:
    """The client's SSE blocks (without the blank-line separator) across every round; `headers`
    gets the first round's relayed headers."""
    messages = list(body["messages"])
    carried = _Carried()
    for round_no in range(loop.max_rounds + 1):
        rnd = ResponsesRound(recall, offer=round_no < loop.max_rounds, carried=carried)
        opening = recall.open_stream(params, loop.round_body(body, messages, rnd.offer), api_key)
        async with aclosing(relayed_round(opening, rnd.feed, headers if round_no == 0 else None)) as blocks:
            async for out in blocks:
                yield out
        if not rnd.continues():
            return
        message = rnd.message()
        messages += await loop.next_round(message.get("content"), rnd.recall_calls())


async def open_stream(looped: RecallUpstream, recall: ResponsesAsChat, params: LiteLLMParams,
                      body: JSON, api_key: str | None) -> StreamingReply:
    """The looped stream of the chat `body` (proxy/recall/looped_stream.py's `open_looped`)."""
    headers: dict[str, str] = {}
    return await open_looped(rounds(looped.loop(NoRounds()), recall, params, body, api_key, headers),
                             headers)
