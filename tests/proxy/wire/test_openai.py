"""The pieces the relay, the transports and the recall loop share (proxy/wire/openai.py, sse.classify)."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.recall.tool_loop import _Carried, _StreamRound
from proxy.wire.openai import compact_json, first_message
from proxy.wire.sse import ReplyAssembler, classify

JSON = dict[str, Any]


@pytest.mark.parametrize(("block", "kind", "body"), [
    (b"data: [DONE]", "done", None),
    (b"data:[DONE] ", "done", None),
    (b"event: error\ndata: upstream overloaded", "error", None),
    (b'event: error\ndata: {"error": {"message": "x"}}', "error", {"error": {"message": "x"}}),
    (b'data: {"error": {"message": "x"}}', "error", {"error": {"message": "x"}}),
    (b'data: {"error": null, "choices": []}', "chunk", {"error": None, "choices": []}),
    (b'data: {"choices": [{"index": 0}]}', "chunk", {"choices": [{"index": 0}]}),
    (b": keep-alive", "other", None),
    (b"data: not json", "other", None),
    (b"data: [1, 2]", "other", None),
])
def test_classify(block: bytes, kind: str, body: JSON | None) -> None:
    event = classify(block)
    assert (event.kind, event.body) == (kind, body)


class OnlySearch:
    def schemas(self) -> list[JSON]:
        return []

    def is_recall(self, name: str) -> bool:
        return name == "context_search"

    async def execute(self, name: str, arguments: str) -> str:
        return "{}"

    async def record_round(self, calls: list[JSON], results: list[JSON]) -> None:
        return None


def _chunk(delta: JSON) -> JSON:
    return {"id": "c1", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def test_relay_and_recall_loop_assemble_tool_calls_alike() -> None:
    """Null and missing indices mean the first call in both; fragments concatenate in order."""
    deltas: list[JSON] = [{"tool_calls": [{"index": None, "id": "call_1", "type": "function",
                               "function": {"name": "context_search", "arguments": '{"pat'}}]},
              {"tool_calls": [{"function": {"arguments": 'tern": "x"}'}}]},
              {"tool_calls": [{"index": None, "function": {"arguments": ""}}]}]
    assembler = ReplyAssembler()
    loop_round = _StreamRound(OnlySearch(), offer=True, carried=_Carried())
    for delta in deltas:
        assembler.feed(_chunk(delta))
        loop_round.feed(_chunk(delta))
    expected = {"id": "call_1", "type": "function",
                "function": {"name": "context_search", "arguments": '{"pattern": "x"}'}}
    assert assembler.message()["tool_calls"] == [expected]
    assert loop_round.recall_calls() == [expected]


def test_first_message_and_compact_json() -> None:
    assert first_message({"choices": [{"message": {"role": "assistant"}}]}) == {"role": "assistant"}
    assert first_message({"choices": []}) is None and first_message({"choices": [{"message": 1}]}) is None
    assert compact_json({"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()
