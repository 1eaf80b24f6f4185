"""The proxy's own tool loop: offer the recall tools to the model and answer its calls itself.

When summaries replaced part of the history, the model is offered `context_search` and
`context_expand` (names from RecallSettings) next to the client's own tools. Its calls to them are
executed here, fed back to the upstream, and hidden from the client, which sees one ordinary
completion (or one SSE stream) mentioning only its own tools. Rounds are bounded: after the last
one the upstream is asked once more WITHOUT the recall tools, so the model has to answer.
Calls and results go to the store's audit table only, never into the conversation's messages.

`usage` in what the client receives is the sum over every upstream round of the turn (that is what
the provider bills for it).
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Protocol

from compaction import Message
from config.errors import CtxProxyError
from proxy.wire.openai import first_message, merge_tool_call, new_tool_call, tool_call_index

JSON = dict[str, Any]


class RecallTools(Protocol):
    """The recall side of the loop: what to offer, which names are ours, how to answer, audit."""

    def schemas(self) -> list[JSON]: ...

    def is_recall(self, name: str) -> bool: ...

    async def execute(self, name: str, arguments: str) -> str: ...

    async def record_round(self, calls: list[JSON], results: list[Message]) -> None: ...


class ResultLimit(Protocol):
    """Keeps what the rounds add within the request's budget (compaction's ResultBudget)."""

    def spend(self, messages: Sequence[Message]) -> None: ...

    def share(self, calls: int) -> int: ...

    def bound(self, name: str, message: Message, allowance: int) -> Message: ...

    def fit(self, messages: list[Message], tools: Sequence[Message]) -> list[Message]: ...


class RoundTransport(Protocol):
    """One upstream round of the loop: a JSON reply, or the stream's chunk objects (without [DONE]).

    (proxy/recall/transport.py binds a proxy.upstream.openai.Upstream to one request's params and key.)"""

    async def complete(self, body: JSON) -> JSON: ...

    def stream(self, body: JSON) -> AsyncGenerator[JSON, None]: ...


def call_name(call: Mapping[str, Any]) -> str:
    """The function name of a tool call ("" when absent)."""
    fn = call.get("function")
    return str(fn.get("name") or "") if isinstance(fn, Mapping) else ""


def add_usage(total: JSON | None, usage: Any) -> JSON | None:
    """Field-wise sum of two OpenAI `usage` objects (nested detail objects included)."""
    if not isinstance(usage, Mapping):
        return total
    if total is None:
        return copy.deepcopy(dict(usage))
    out = dict(total)
    for key, value in usage.items():
        mine = out.get(key)
        if isinstance(value, bool) or value is None:
            out.setdefault(key, value)
        elif isinstance(value, int | float) and isinstance(mine, int | float | None):
            out[key] = (mine or 0) + value
        elif isinstance(value, Mapping):
            out[key] = add_usage(mine if isinstance(mine, dict) else None, value)
    return out


@dataclass
class ToolLoop:
    """Runs one chat turn against the upstream while answering the recall tool calls in between."""

    tools: RecallTools
    upstream: RoundTransport
    max_rounds: int
    limit: ResultLimit | None = None  # None: results are not cut (tests of the loop alone)

    def round_body(self, body: JSON, messages: list[Message], offer: bool) -> JSON:
        """The body of one upstream round: the client's tools, plus ours when `offer`."""
        tools = list(body.get("tools") or []) + (self.tools.schemas() if offer else [])
        out = {**body, "messages": self.limit.fit(messages, tools) if self.limit else messages}
        if tools:
            out["tools"] = tools
        else:  # nothing left to offer: a bare tool_choice would be rejected by the provider
            for key in ("tools", "tool_choice", "parallel_tool_calls"):
                out.pop(key, None)
        return out

    async def answer(self, calls: list[JSON]) -> list[Message]:
        """Execute the model's recall calls; audit the round; the `tool` messages to send back.

        With a `limit`, each result is cut to its share of the budget the request has left.
        """
        share = self.limit.share(len(calls)) if self.limit else 0
        results: list[Message] = []
        for call in calls:
            fn = call.get("function") or {}
            try:
                content = await self.tools.execute(call_name(call), str(fn.get("arguments") or "{}"))
            except CtxProxyError as exc:  # a bad argument or unknown id is the model's to fix
                content = _error_result(exc)
            result: Message = {"role": "tool", "tool_call_id": call.get("id"), "content": content}
            results.append(self.limit.bound(call_name(call), result, share) if self.limit else result)
        if self.limit:
            self.limit.spend(results)
        await self.tools.record_round(calls, results)
        return results

    async def next_round(self, content: Any, calls: list[JSON]) -> list[JSON]:
        """What the next round adds: the assistant's recall calls, then their (bounded) results."""
        turn = _assistant_turn(content, calls)
        if self.limit:
            self.limit.spend([turn])
        return [turn, *await self.answer(calls)]

    async def complete(self, body: JSON) -> JSON:
        """Non-streaming: the final completion as the client should see it."""
        messages = list(body["messages"])
        usage: JSON | None = None
        for round_no in range(self.max_rounds + 1):
            offer = round_no < self.max_rounds
            reply = await self.upstream.complete(self.round_body(body, messages, offer))
            usage = add_usage(usage, reply.get("usage"))
            message = first_message(reply) or {}
            ours, theirs = self._split(message.get("tool_calls") or [])
            if not ours or theirs or not offer:
                return self._client_view(reply, usage)
            messages += await self.next_round(message.get("content"), ours)
        raise AssertionError("unreachable: the last round never offers the recall tools")

    def _split(self, calls: Sequence[JSON]) -> tuple[list[JSON], list[JSON]]:
        ours = [c for c in calls if self.tools.is_recall(call_name(c))]
        return ours, [c for c in calls if not self.tools.is_recall(call_name(c))]

    def _client_view(self, reply: JSON, usage: JSON | None) -> JSON:
        """The reply without any recall call, finish_reason fixed, usage summed over rounds."""
        out = copy.deepcopy(reply)
        for choice in out.get("choices") or []:
            message = choice.get("message") or {}
            theirs = self._split(message.get("tool_calls") or [])[1]
            if theirs:
                message["tool_calls"] = theirs
            elif message.pop("tool_calls", None) is not None and choice.get("finish_reason") == "tool_calls":
                choice["finish_reason"] = "stop"
        if usage is not None:
            out["usage"] = usage
        return out

    async def stream(self, body: JSON) -> AsyncGenerator[JSON, None]:
        """Streaming: the chunk objects to send the client, in order, across every round.

        Upstream errors propagate: raised before the first chunk they can still become a normal
        error response; later, the caller reports them as an SSE error event.
        """
        messages = list(body["messages"])
        carried = _Carried()
        for round_no in range(self.max_rounds + 1):
            rnd = _StreamRound(self.tools, offer=round_no < self.max_rounds, carried=carried)
            async with aclosing(self.upstream.stream(self.round_body(body, messages, rnd.offer))) as chunks:
                async for chunk in chunks:
                    out = rnd.feed(chunk)
                    if out is not None:
                        yield out
            if not rnd.continues():
                return
            calls = rnd.recall_calls()
            messages += await self.next_round(rnd.content(), calls)


def _assistant_turn(content: Any, calls: list[JSON]) -> Message:
    """The assistant message replayed to the upstream: its text and only the recall calls."""
    return {"role": "assistant", "content": content or None,
            "tool_calls": [{"id": c.get("id"), "type": "function",
                            "function": {"name": call_name(c),
                                         "arguments": (c.get("function") or {}).get("arguments") or ""}}
                           for c in calls]}


def _error_result(exc: CtxProxyError) -> str:
    return json.dumps({"error": {"message": exc.message, "param": exc.param, "code": exc.code}})


@dataclass
class _Carried:
    """What outlives one streamed round: the id the client sees and the usage so far."""

    stream_id: str | None = None
    usage: JSON | None = None
    rounds: int = 0


@dataclass
class _StreamRound:
    """Rewrites one upstream stream for the client: recall call deltas are withheld and collected,
    the client's pass through re-indexed, a finish that only means "call our tools" is withheld."""

    tools: RecallTools
    offer: bool
    carried: _Carried
    routes: dict[int, int | None] = field(default_factory=dict)  # upstream index -> client index
    recall: dict[int, JSON] = field(default_factory=dict)
    text: list[str] = field(default_factory=list)
    client_calls: int = 0
    finished: bool = False
    first: bool = field(init=False)

    def __post_init__(self) -> None:
        self.first = self.carried.rounds == 0
        self.carried.rounds += 1

    def continues(self) -> bool:
        """The round ended asking only for our tools, and another round is allowed."""
        return self.offer and bool(self.recall) and self.client_calls == 0

    def content(self) -> str:
        return "".join(self.text)

    def recall_calls(self) -> list[JSON]:
        return [self.recall[i] for i in sorted(self.recall)]

    def feed(self, chunk: JSON) -> JSON | None:
        """The chunk to forward (rewritten), or None to withhold it."""
        self.carried.stream_id = self.carried.stream_id or chunk.get("id")
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            self.carried.usage = add_usage(self.carried.usage, usage)
        if self.finished and self.continues():
            return None  # the tail (usage) of a round that only called our tools
        out = {**chunk, "id": self.carried.stream_id}
        raw = chunk.get("choices")
        if raw:
            out["choices"] = [c for c in (self._choice(c) for c in raw if isinstance(c, dict))
                              if c is not None]
        if isinstance(usage, Mapping):
            if self.finished and self.continues():
                del out["usage"]
            else:
                out["usage"] = self.carried.usage
        if raw and not out["choices"] and not isinstance(out.get("usage"), Mapping):
            return None
        return out

    def _choice(self, choice: JSON) -> JSON | None:
        delta = dict(choice.get("delta") or {})
        if "tool_calls" in delta:
            kept = self._tool_deltas(delta.pop("tool_calls") or [])
            if kept:
                delta["tool_calls"] = kept
        if not self.first:
            delta.pop("role", None)  # the client already got its one assistant turn start
        if isinstance(delta.get("content"), str):
            self.text.append(delta["content"])
        finish = choice.get("finish_reason")
        if finish is not None:
            self.finished = True
            if self.continues():
                finish = None
            elif finish == "tool_calls" and self.client_calls == 0:
                finish = "stop"
        if finish is None and not choice.get("logprobs") and all(v is None for v in delta.values()):
            return None
        return {**choice, "delta": delta, "finish_reason": finish}

    def _tool_deltas(self, deltas: list[Any]) -> list[JSON]:
        """Collect deltas of recall calls; pass the client's through with contiguous indices."""
        kept: list[JSON] = []
        for d in deltas:
            if not isinstance(d, dict):
                continue
            index = tool_call_index(d)
            if index not in self.routes:
                self.routes[index] = None if self.tools.is_recall(call_name(d)) else self._next_client()
            route = self.routes[index]
            if route is None:
                self._collect(index, d)
            else:
                kept.append({**d, "index": route})
        return kept

    def _next_client(self) -> int:
        self.client_calls += 1
        return self.client_calls - 1

    def _collect(self, index: int, d: JSON) -> None:
        merge_tool_call(self.recall.setdefault(index, new_tool_call()), d)
