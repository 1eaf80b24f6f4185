"""proxy.wire.sse: incremental parsing, reply assembly, and the relay's handling of broken streams."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from config.errors import UpstreamError
from proxy.wire.sse import RelayOutcome, ReplyAssembler, SSEParser, event_data, relay
from tests.fakes.upstream import Reply, stream_events, tool_call


def test_parser_reassembles_events_split_anywhere() -> None:
    stream = b"data: {\"a\": 1}\n\ndata: {\"b\": 2}\r\n\r\ndata: [DONE]\n\n"
    for cut in range(1, len(stream)):
        parser = SSEParser()
        events = parser.feed(stream[:cut]) + parser.feed(stream[cut:])
        assert [event_data(e)[1] for e in events] == [b'{"a": 1}', b'{"b": 2}', b"[DONE]"]


def test_assembler_rebuilds_text_and_parallel_tool_calls() -> None:
    script = Reply(text="Hello there", tool_calls=[tool_call("call_1", "get", {"city": "Lisboa"}),
                                                    tool_call("call_2", "put", {"n": 2})])
    assembler = ReplyAssembler()
    for event in stream_events({"model": "m"}, script)[:-1]:
        assembler.feed(json.loads(event_data(event.strip())[1]))
    message = assembler.message()
    assert message["content"] == "Hello there"
    assert [c["id"] for c in message["tool_calls"]] == ["call_1", "call_2"]
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"city": "Lisboa"}
    assert message["tool_calls"][1]["function"]["name"] == "put"


async def events_of(blocks: list[bytes], error: Exception | None = None) -> AsyncIterator[bytes]:
    for block in blocks:
        yield block
    if error is not None:
        raise error


async def run_relay(blocks: list[bytes], error: Exception | None = None) -> tuple[RelayOutcome, bytes]:
    written: list[bytes] = []

    async def write(data: bytes) -> None:
        written.append(data)

    outcome = await relay(events_of(blocks, error), write)
    return outcome, b"".join(written)


async def test_relay_complete_stream() -> None:
    blocks = [e.strip() for e in stream_events({"model": "m"}, Reply(text="hi"))]
    outcome, out = await run_relay(blocks)
    assert outcome.complete and outcome.assembler.message()["content"] == "hi"
    assert out.endswith(b"data: [DONE]\n\n") and b"event: error" not in out


async def test_relay_cut_stream_ends_with_error_event() -> None:
    blocks = [e.strip() for e in stream_events({"model": "m"}, Reply(text="hello"))][:2]
    outcome, out = await run_relay(blocks, UpstreamError("reset"))
    assert not outcome.complete
    name, data = event_data(out.strip().split(b"\n\n")[-1])
    assert name == "error" and json.loads(data)["error"]["message"] == "reset"


async def test_relay_missing_done_is_an_error() -> None:
    blocks = [e.strip() for e in stream_events({"model": "m"}, Reply(text="x", omit_done=True))]
    outcome, out = await run_relay(blocks)
    assert not outcome.complete and b"event: error" in out


WIRE = (b": keepalive\n\nevent: message\ndata: {\"a\":\ndata:  1}\n\ndata:[DONE]\n\n")


def test_parser_handles_cr_crlf_and_lf_split_anywhere() -> None:
    for ending in (b"\n", b"\r\n", b"\r"):
        stream = WIRE.replace(b"\n", ending)
        for cut in range(1, len(stream)):
            parser = SSEParser()
            events = parser.feed(stream[:cut]) + parser.feed(stream[cut:])
            assert [event_data(e) for e in events] == [
                (None, b""), ("message", b'{"a":\n 1}'), (None, b"[DONE]")], (ending, cut)
            assert parser.tail() == b""


def test_bare_cr_events_are_complete_as_soon_as_they_arrive() -> None:
    parser = SSEParser()
    assert [event_data(e)[1] for e in parser.feed(b'data: {"a": 1}\r\r')] == [b'{"a": 1}']
    assert parser.feed(b"\n") == []  # a late LF completing the CR is not a new blank line


def test_data_drops_exactly_one_leading_space() -> None:
    assert event_data(b"data:  two spaces")[1] == b" two spaces"
    assert event_data(b"data:none")[1] == b"none"
    assert event_data(b"data: a\ndata: b")[1] == b"a\nb"
