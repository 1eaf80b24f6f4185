"""Held bodies when a client moves its cache mark (proxy/server/resent_body.py): the previous newest
message changes (its mark removed) and the rest is resent; the parse resumes after the message before
it, and the result is exactly what parsing the body in full gives."""

from __future__ import annotations

import json
from typing import Any

from proxy.server.body import _plain, parse_json_object
from proxy.server.resent_body import MIN_BYTES, ResentBodies

MARK = {"type": "ephemeral"}
SYSTEM = [{"type": "text", "text": "You are Claude Code.", "cache_control": MARK}]
PAD = "padding " * (MIN_BYTES // 8)


def _body(turns: int, compact: bool = True) -> bytes:
    """A Messages body of `turns` tool rounds, the cache mark on the newest message's last block."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": PAD + "go é😀"}]}]
    for i in range(turns):
        use = {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": f"ls ]}} {i}"}}
        messages += [{"role": "assistant", "content": [use]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                                                   "content": f"out \"{i}\"\n"}]}]
    last = messages[-1]["content"][-1]
    messages[-1]["content"][-1] = {**last, "cache_control": MARK}
    body = {"model": "claude", "messages": messages, "system": SYSTEM, "max_tokens": 100, "stream": True}
    return json.dumps(body, separators=(",", ":") if compact else None, ensure_ascii=False).encode()


def _read(bodies: ResentBodies, raw: bytes) -> tuple[dict[str, Any], bool]:
    body = bodies.parse("tenant", raw, _plain)
    if body is not None:
        return body, True
    body = parse_json_object(raw)
    bodies.keep("tenant", raw, body)
    return body, False


def test_a_moved_mark_resumes_after_the_message_before_it() -> None:
    bodies = ResentBodies()
    first, reused = _read(bodies, _body(3))
    assert not reused
    for turns in range(4, 8):
        raw = _body(turns)
        body, reused = _read(bodies, raw)
        assert reused and body == parse_json_object(raw)
        assert body["messages"][0] is first["messages"][0]  # the held dicts themselves


def test_a_writer_that_is_not_compact_is_parsed_in_full() -> None:
    bodies = ResentBodies()
    _read(bodies, _body(3, compact=False))
    body, reused = _read(bodies, _body(4, compact=False))
    assert not reused and body == parse_json_object(_body(4, compact=False))


def test_an_edit_before_the_last_message_is_parsed_in_full() -> None:
    bodies = ResentBodies()
    _read(bodies, _body(3))
    edited = _body(4).replace(b"ls ]} 1", b"ls ]} X")
    assert edited != _body(4)
    body, reused = _read(bodies, edited)
    assert not reused and body == parse_json_object(edited)
