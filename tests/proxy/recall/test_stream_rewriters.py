"""The looped stream rewriters alone: whatever each round holds, the client gets one well-formed
stream (Messages: one message_start, block indices 0..n-1 in order; Responses: output indices and
sequence numbers consecutive) and nothing of the recall calls."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from config.settings import LiteLLMParams, RecallSettings
from proxy.recall.messages import MessagesAsChat
from proxy.recall.messages_stream import MessagesRound
from proxy.recall.messages_stream import _Carried as MessagesCarried
from proxy.recall.responses import ResponsesAsChat
from proxy.recall.responses_stream import ResponsesRound
from proxy.recall.responses_stream import _Carried as ResponsesCarried
from proxy.upstream.openai import StreamingReply, UpstreamReply
from proxy.wire.sse import event_data
from tests.fakes import responses_api
from tests.fakes.anthropic_upstream import MessageReply, stream_events
from tests.fakes.upstream import tool_call

JSON = dict[str, Any]
SETTINGS = RecallSettings()
OURS, THEIRS = SETTINGS.search_tool_name, "get_weather"


class _Unused:
    """A transport the rewriters never call."""

    async def complete(self, params: LiteLLMParams, body: JSON, api_key: str | None) -> UpstreamReply:
        raise AssertionError("not called")

    async def open_stream(self, params: LiteLLMParams, body: JSON, api_key: str | None) -> StreamingReply:
        raise AssertionError("not called")


rounds = st.lists(st.tuples(st.booleans(), st.booleans(), st.lists(st.sampled_from([OURS, THEIRS]),
                                                                   max_size=3)), min_size=1, max_size=4)


def _events(blocks: list[bytes]) -> list[JSON]:
    return [json.loads(event_data(b.strip())[1]) for b in blocks]


@given(rounds)
def test_messages_stream_is_one_message(scripts: list[tuple[bool, bool, list[str]]]) -> None:
    recall = MessagesAsChat(_Unused(), {}, (), lambda head: {}, SETTINGS)
    carried, out = MessagesCarried(), []
    for n, (thinking, text, names) in enumerate(scripts):
        rnd = MessagesRound(recall, offer=n < len(scripts) - 1, carried=carried)
        uses = [{"id": f"toolu_{n}_{i}", "name": name, "input": {"q": i}} for i, name in enumerate(names)]
        reply = MessageReply(text="hi" if text else None, tool_uses=uses, thinking="t" if thinking else None)
        out += [b for b in (rnd.feed(e.strip()) for e in stream_events({}, reply)) if b is not None]
        if not (rnd.stopped and rnd.continues()):
            break
        carried.usage = rnd.total_usage()
    events = _events(out)
    kinds = [e["type"] for e in events]
    assert kinds.count("message_start") == 1 and kinds[0] == "message_start"
    assert kinds.count("message_delta") == kinds.count("message_stop") == 1 and kinds[-1] == "message_stop"
    starts = [e["index"] for e in events if e["type"] == "content_block_start"]
    assert starts == list(range(len(starts)))
    assert {e["index"] for e in events if "index" in e} == set(starts)
    assert OURS not in json.dumps(events)
    delta = next(e for e in events if e["type"] == "message_delta")
    assert delta["usage"]["output_tokens"] == 7 * carried.rounds  # each round's, summed
    assert (delta["delta"]["stop_reason"] == "tool_use") == (THEIRS in json.dumps(events))


@given(rounds)
def test_responses_stream_is_one_response(scripts: list[tuple[bool, bool, list[str]]]) -> None:
    recall = ResponsesAsChat(_Unused(), {}, SETTINGS)  # type: ignore[arg-type]
    carried, out = ResponsesCarried(), []
    for n, (reasoning, text, names) in enumerate(scripts):
        rnd = ResponsesRound(recall, offer=n < len(scripts) - 1, carried=carried)
        calls = [tool_call(f"call_{n}_{i}", name, {"q": i}) for i, name in enumerate(names)]
        items = responses_api.output_items("hi" if text else None, calls, reasoning, f"_{n}")
        fed = (rnd.feed(e.strip()) for e in responses_api.sse_events({}, items))
        out += [b for b in fed if b is not None]
        if not rnd.continues():
            break
    events = _events(out)
    kinds = [e["type"] for e in events]
    assert kinds.count("response.created") == 1 and kinds.count("response.completed") == 1
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    added = [e["output_index"] for e in events if e["type"] == "response.output_item.added"]
    assert added == list(range(len(added)))
    final = events[-1]["response"]
    assert len(final["output"]) == len(added) and OURS not in json.dumps(events)
