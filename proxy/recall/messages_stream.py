"""The recall tool loop on a streaming POST /v1/messages: one Messages event stream over every round.

Each round is one upstream stream (proxy/recall/messages.py builds its body); its events are
rewritten as they arrive: `message_start` only from the first round, the content blocks of every
round renumbered consecutively, recall `tool_use` blocks withheld (collected for the proxy to
answer), and a round that only called the recall tools ends without its `message_delta` and
`message_stop`: the loop answers the calls and the next round continues the same client message.
The one `message_delta` the client gets carries the stop reason of the last round (`tool_use`
only when a client tool was called) and usage summed over every round, as the chat tool loop sums
it (`message_start` can only carry the first round's input usage).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from config.errors import UpstreamError
from config.settings import LiteLLMParams
from proxy.recall.looped_stream import NoRounds, open_looped, relayed_round
from proxy.recall.messages import MessagesAsChat, is_recall_use, recall_calls
from proxy.recall.tool_loop import ToolLoop, add_usage
from proxy.recall.transport import RecallUpstream
from proxy.upstream.openai import StreamingReply
from proxy.wire.anthropic_stream import MessageAssembler
from proxy.wire.sse import event_data

JSON = dict[str, Any]


@dataclass
class _Carried:
    """What outlives one round: the next client block index and the usage of finished rounds."""

    next_index: int = 0
    usage: JSON | None = None
    rounds: int = 0


@dataclass
class MessagesRound:
    """Rewrites one round's events for the client and assembles the round's own reply."""

    recall: MessagesAsChat
    offer: bool
    carried: _Carried
    assembler: MessageAssembler = field(default_factory=MessageAssembler)
    routes: dict[int, int | None] = field(default_factory=dict)  # upstream index -> client index
    client_uses: int = 0  # the client's own tool_use blocks this round
    stopped: bool = False  # message_stop seen
    first: bool = field(init=False)

    def __post_init__(self) -> None:
        self.first = self.carried.rounds == 0
        self.carried.rounds += 1

    def continues(self) -> bool:
        """The round asked only for our tools, and another round is allowed."""
        return (self.offer and self.client_uses == 0
                and bool(recall_calls(self.content(), self.recall.settings)))

    def content(self) -> list[JSON]:
        """The round's reply blocks so far; a reply that cannot be assembled ends the stream."""
        try:
            return self.assembler.content()
        except (TypeError, ValueError) as exc:
            raise UpstreamError(f"could not assemble the reply: {type(exc).__name__}") from exc

    def feed(self, block: bytes) -> bytes | None:
        """The block to forward (rewritten), or None to withhold it."""
        _, data = event_data(block)
        try:
            event = json.loads(data) if data else None
        except ValueError:
            return block
        if not isinstance(event, dict):
            return block
        kind = event.get("type")
        if kind in ("message_start", "content_block_start", "content_block_delta", "message_delta"):
            self._assemble(event)
        if kind == "message_start":
            return block if self.first else None
        if kind in ("content_block_start", "content_block_delta", "content_block_stop"):
            return self._block_event(event)
        if kind == "message_delta":
            return None if self.continues() else _encode(self._last_delta(event))
        if kind == "message_stop":
            self.stopped = True
            return None if self.continues() else block
        return block  # ping, error, and events this proxy does not know

    def _assemble(self, event: JSON) -> None:
        try:
            self.assembler.feed(event)
        except (TypeError, ValueError) as exc:
            raise UpstreamError(f"could not assemble the reply: {type(exc).__name__}") from exc

    def _block_event(self, event: JSON) -> bytes | None:
        """A content block event at its client index; None for a recall call's events."""
        index = self.assembler_index(event)
        if index not in self.routes:
            opened = event.get("content_block")
            ours = is_recall_use(opened, self.recall.settings)
            self.routes[index] = None if ours else self._next()
            if not ours and isinstance(opened, dict) and opened.get("type") == "tool_use":
                self.client_uses += 1
        route = self.routes[index]
        return None if route is None else _encode({**event, "index": route})

    def _next(self) -> int:
        self.carried.next_index += 1
        return self.carried.next_index - 1

    def _last_delta(self, event: JSON) -> JSON:
        """The client's one message_delta: usage summed over the rounds, stop reason fixed."""
        delta = dict(event.get("delta") or {})
        if delta.get("stop_reason") == "tool_use" and self.client_uses == 0:
            delta["stop_reason"] = "end_turn"
        return {**event, "delta": delta, "usage": self.total_usage()}

    def total_usage(self) -> JSON:
        return add_usage(self.carried.usage, self.assembler.usage) or {}

    @staticmethod
    def assembler_index(event: JSON) -> int:
        """The event's block index, as the assembler reads it."""
        raw = event.get("index") or 0
        return raw if isinstance(raw, int) else 0

    def text(self) -> str:
        """The round's text (what the loop replays as the assistant turn's content)."""
        return "".join(str(b.get("text") or "") for b in self.content() if b.get("type") == "text")


def _encode(event: JSON) -> bytes:
    return f"event: {event.get('type')}\ndata: {json.dumps(event)}".encode()


async def rounds(loop: ToolLoop, recall: MessagesAsChat, params: LiteLLMParams, body: JSON,
                 api_key: str | None, headers: dict[str, str]) -> AsyncGenerator[bytes, None]:
    """The client's SSE blocks (without the blank-line separator) across every round; `headers`
    gets the first round's relayed headers."""
    messages = list(body["messages"])
    carried = _Carried()
    for round_no in range(loop.max_rounds + 1):
        rnd = MessagesRound(recall, offer=round_no < loop.max_rounds, carried=carried)
        opening = recall.open_stream(params, loop.round_body(body, messages, rnd.offer), api_key)
        async with aclosing(relayed_round(opening, rnd.feed, headers if round_no == 0 else None)) as blocks:
            async for out in blocks:
                yield out
        if not (rnd.stopped and rnd.continues()):
            return
        carried.usage = rnd.total_usage()
        content = rnd.content()
        recall.replies.append(content)
        messages += await loop.next_round(rnd.text(), recall_calls(content, recall.settings))


async def open_stream(looped: RecallUpstream, recall: MessagesAsChat, params: LiteLLMParams,
                      body: JSON, api_key: str | None) -> StreamingReply:
    """The looped stream of the chat `body`; see `open_looped`."""
    headers: dict[str, str] = {}
    return await open_looped(rounds(looped.loop(NoRounds()), recall, params, body, api_key, headers),
                             headers)
