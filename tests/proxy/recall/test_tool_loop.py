"""The recall tool loop on its own: scripted upstream rounds in memory, a recording recall side."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

import pytest

from config.errors import NotFoundError, UpstreamError
from proxy.recall.tool_loop import ToolLoop, add_usage

JSON = dict[str, Any]
SEARCH, EXPAND = "context_search", "context_expand"
CLIENT_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


@dataclass
class FakeRecall:
    """Answers search with a fixed hit and expand with a fixed text; records every audited round."""

    rounds: list[tuple[list[JSON], list[JSON]]] = field(default_factory=list)
    executed: list[tuple[str, str]] = field(default_factory=list)

    def schemas(self) -> list[JSON]:
        return [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
                for n in (SEARCH, EXPAND)]

    def is_recall(self, name: str) -> bool:
        return name in (SEARCH, EXPAND)

    async def execute(self, name: str, arguments: str) -> str:
        self.executed.append((name, arguments))
        if "missing" in arguments:
            raise NotFoundError("no such id", param="ids")
        return json.dumps({"name": name, "found": "ORD-2024-1187"})

    async def record_round(self, calls: list[JSON], results: list[JSON]) -> None:
        self.rounds.append((calls, results))


@dataclass
class ScriptedUpstream:
    """Each call pops the next scripted reply (a dict) or stream (a list of chunks, or an error)."""

    script: list[Any]
    bodies: list[JSON] = field(default_factory=list)

    async def complete(self, body: JSON) -> JSON:
        self.bodies.append(json.loads(json.dumps(body)))
        reply = self.script.pop(0)
        if isinstance(reply, Exception):
            raise reply
        assert isinstance(reply, dict)
        return reply

    async def stream(self, body: JSON) -> AsyncGenerator[JSON, None]:
        self.bodies.append(json.loads(json.dumps(body)))
        chunks = self.script.pop(0)
        if isinstance(chunks, Exception):
            raise chunks
        for chunk in chunks:
            yield chunk


def call(i: int, name: str, args: JSON) -> JSON:
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def reply(content: str | None, calls: list[JSON] | None = None, tokens: int = 10) -> JSON:
    message: JSON = {"role": "assistant", "content": content, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {"id": f"chatcmpl-{tokens}", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": tokens, "completion_tokens": 1, "total_tokens": tokens + 1}}


BODY: JSON = {"model": "m", "messages": [{"role": "user", "content": "what was my order?"}],
              "tools": [CLIENT_TOOL], "tool_choice": "auto"}


def loop(script: list[Any], max_rounds: int = 3) -> tuple[ToolLoop, FakeRecall, ScriptedUpstream]:
    recall, upstream = FakeRecall(), ScriptedUpstream(script)
    return ToolLoop(recall, upstream, max_rounds), recall, upstream


def names(body: JSON) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


async def test_non_streaming_answers_recall_calls_and_hides_them() -> None:
    tl, recall, upstream = loop([reply(None, [call(1, SEARCH, {"pattern": "order"})], 10),
                                 reply(None, [call(2, EXPAND, {"ids": ["7"]})], 20),
                                 reply("Your order is ORD-2024-1187.", None, 30)])
    out = await tl.complete(BODY)
    message = out["choices"][0]["message"]
    assert message["content"] == "Your order is ORD-2024-1187."
    assert "tool_calls" not in message and out["choices"][0]["finish_reason"] == "stop"
    assert out["usage"] == {"prompt_tokens": 60, "completion_tokens": 3, "total_tokens": 63}
    assert [b["tools"] for b in upstream.bodies[:1]] == [[CLIENT_TOOL, *recall.schemas()]]
    assert all(b["tool_choice"] == "auto" for b in upstream.bodies)
    third = upstream.bodies[2]["messages"]
    assert [m["role"] for m in third] == ["user", "assistant", "tool", "assistant", "tool"]
    assert third[1]["tool_calls"][0]["function"]["name"] == SEARCH
    assert "ORD-2024-1187" in third[4]["content"] and third[4]["tool_call_id"] == "call_2"
    assert [r[0][0]["id"] for r in recall.rounds] == ["call_1", "call_2"]
    assert BODY["messages"] == [{"role": "user", "content": "what was my order?"}]  # not mutated


async def test_last_round_withdraws_recall_tools_and_strips_stray_calls() -> None:
    tl, recall, upstream = loop([reply(None, [call(1, SEARCH, {"pattern": "a"})]),
                                 reply("answer", [call(2, SEARCH, {"pattern": "b"})])], max_rounds=1)
    out = await tl.complete({"model": "m", "messages": [{"role": "user", "content": "q"}]})
    assert names(upstream.bodies[0]) == [SEARCH, EXPAND]
    assert "tools" not in upstream.bodies[1] and "tool_choice" not in upstream.bodies[1]
    assert out["choices"][0]["message"] == {"role": "assistant", "content": "answer", "refusal": None}
    assert out["choices"][0]["finish_reason"] == "stop"
    assert len(recall.executed) == 1


async def test_mixed_calls_return_only_the_clients() -> None:
    client_call = call(2, "get_weather", {"city": "Oslo"})
    tl, recall, upstream = loop([reply(None, [call(1, SEARCH, {"pattern": "a"}), client_call])])
    out = await tl.complete(BODY)
    assert out["choices"][0]["message"]["tool_calls"] == [client_call]
    assert out["choices"][0]["finish_reason"] == "tool_calls"
    assert recall.executed == [] and len(upstream.bodies) == 1


async def test_tool_errors_go_back_to_the_model() -> None:
    tl, recall, upstream = loop([reply(None, [call(1, EXPAND, {"ids": ["missing"]})]), reply("sorry")])
    out = await tl.complete(BODY)
    assert out["choices"][0]["message"]["content"] == "sorry"
    result = json.loads(upstream.bodies[1]["messages"][-1]["content"])
    assert result["error"]["code"] == "not_found"
    assert recall.rounds[0][1][0]["content"] == upstream.bodies[1]["messages"][-1]["content"]


async def test_upstream_error_in_a_later_round_propagates() -> None:
    tl, _, _ = loop([reply(None, [call(1, SEARCH, {"pattern": "a"})]), UpstreamError("down")])
    with pytest.raises(UpstreamError):
        await tl.complete(BODY)


# ---- streaming -------------------------------------------------------------------------------


def chunk(cid: str, delta: JSON | None = None, finish: str | None = None, usage: JSON | None = None) -> JSON:
    choices = [] if delta is None and finish is None else [
        {"index": 0, "delta": delta or {}, "finish_reason": finish}]
    out: JSON = {"id": cid, "object": "chat.completion.chunk", "created": 1, "model": "m",
                 "choices": choices}
    if usage is not None:
        out["usage"] = usage
    return out


def tc(index: int, cid: str | None = None, name: str | None = None, args: str = "") -> JSON:
    d: JSON = {"index": index, "function": {"arguments": args}}
    if cid:
        d["id"], d["type"], d["function"]["name"] = cid, "function", name
    return d


USAGE = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}


def recall_stream(cid: str, name: str, args: str) -> list[JSON]:
    return [chunk(cid, {"role": "assistant", "content": None}),
            chunk(cid, {"tool_calls": [tc(0, f"call_{cid}", name, args[:5])]}),
            chunk(cid, {"tool_calls": [tc(0, args=args[5:])]}),
            chunk(cid, finish="tool_calls"), chunk(cid, usage=USAGE)]


async def collect(tl: ToolLoop, body: JSON) -> list[JSON]:
    return [c async for c in tl.stream(body)]


async def test_streaming_runs_rounds_into_one_client_stream() -> None:
    final = [chunk("c3", {"role": "assistant", "content": ""}), chunk("c3", {"content": "ORD-2024"}),
             chunk("c3", {"content": "-1187"}), chunk("c3", finish="stop"), chunk("c3", usage=USAGE)]
    tl, recall, upstream = loop([recall_stream("c1", SEARCH, '{"pattern": "order"}'),
                                 recall_stream("c2", EXPAND, '{"ids": ["7"]}'), final])
    out = await collect(tl, BODY)
    assert {c["id"] for c in out} == {"c1"}
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in out if c["choices"])
    assert text == "ORD-2024-1187"
    assert not any("tool_calls" in c["choices"][0]["delta"] for c in out if c["choices"])
    assert [c["choices"][0]["finish_reason"] for c in out if c["choices"]][-1] == "stop"
    assert [c["usage"] for c in out if c.get("usage")] == [add_usage(add_usage(USAGE, USAGE), USAGE)]
    assert sum(1 for c in out for ch in c["choices"] if "role" in ch["delta"]) == 1
    assert recall.executed == [(SEARCH, '{"pattern": "order"}'), (EXPAND, '{"ids": ["7"]}')]
    replay = upstream.bodies[2]["messages"]
    assert replay[1]["tool_calls"][0]["function"] == {"name": SEARCH, "arguments": '{"pattern": "order"}'}
    assert replay[2] == {"role": "tool", "tool_call_id": "call_c1",
                         "content": recall.rounds[0][1][0]["content"]}


async def test_streaming_interleaved_client_calls_are_reindexed() -> None:
    stream = [chunk("c1", {"role": "assistant", "content": None}),
              chunk("c1", {"tool_calls": [tc(0, "call_a", SEARCH, '{"pat'), tc(1, "call_b", "get_weather")]}),
              chunk("c1", {"tool_calls": [tc(0, args='tern": "x"}'), tc(1, args='{"city": "Oslo"}')]}),
              chunk("c1", finish="tool_calls")]
    tl, recall, upstream = loop([stream])
    out = await collect(tl, BODY)
    deltas = [d for c in out for ch in c["choices"] for d in ch["delta"].get("tool_calls", [])]
    assert {d["index"] for d in deltas} == {0}
    assert [d["function"].get("name") for d in deltas] == ["get_weather", None]
    assert "".join(d["function"]["arguments"] for d in deltas) == '{"city": "Oslo"}'
    assert out[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert recall.executed == [] and len(upstream.bodies) == 1


async def test_streaming_error_in_later_round_raises_after_first_chunks() -> None:
    tl, _, _ = loop([recall_stream("c1", SEARCH, '{"pattern": "order"}'), UpstreamError("down")])
    got: list[JSON] = []
    with pytest.raises(UpstreamError):
        async for c in tl.stream(BODY):
            got.append(c)
    assert got and not any(c["choices"] and c["choices"][0].get("finish_reason") for c in got)


async def test_streaming_last_round_withdraws_tools() -> None:
    final = [chunk("c2", {"role": "assistant", "content": "done"}),
             chunk("c2", {"tool_calls": [tc(0, "call_z", SEARCH, "{}")]}), chunk("c2", finish="tool_calls")]
    tl, recall, upstream = loop([recall_stream("c1", SEARCH, '{"pattern": "order"}'), final], max_rounds=1)
    out = await collect(tl, {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True})
    assert "tools" not in upstream.bodies[1]
    assert out[-1]["choices"][0]["finish_reason"] == "stop"
    assert len(recall.executed) == 1


def test_add_usage_sums_nested_details() -> None:
    a = {"prompt_tokens": 1, "prompt_tokens_details": {"cached_tokens": 2}, "total_tokens": 1}
    b = {"prompt_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}, "total_tokens": 3}
    assert add_usage(add_usage(None, a), b) == {"prompt_tokens": 4, "total_tokens": 4,
                                                "prompt_tokens_details": {"cached_tokens": 6}}
