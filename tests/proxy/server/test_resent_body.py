"""Held chat bodies (proxy/server/resent_body.py): a resend's body is parsed past the messages a held
body shares, and the result is always exactly what parsing it in full gives; anything else (an edit,
another layout, another tenant, a body that is not valid JSON) is left to the full parse."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.types import Message
from proxy.server.body import _plain, parse_json_object
from proxy.server.resent_body import MIN_BYTES, ResentBodies

PAD = {"role": "system", "content": "You are a careful agent. " * (MIN_BYTES // 24)}
FORMATS: dict[str, dict[str, Any]] = {
    "compact": {"separators": (",", ":"), "ensure_ascii": False},
    "spaced": {},  # json.dumps' default: ", " and ": ", non-ASCII escaped
    "indented": {"indent": 2},
    "tabs": {"indent": "\t", "ensure_ascii": False},
}
LAYOUTS = {
    "messages first": lambda m: {"messages": m, "model": "gpt-4o", "temperature": 0.2},
    "model first": lambda m: {"model": "gpt-4o", "messages": m},
    "messages last": lambda m: {"model": "gpt-4o", "stream": False, "messages": m},
}


def _encoded(body: dict[str, Any], fmt: str) -> bytes:
    return json.dumps(body, **FORMATS[fmt]).encode()


def _read(bodies: ResentBodies, raw: bytes, scope: str = "tenant-a") -> tuple[dict[str, Any], bool]:
    """What the chat handler gets (proxy/server/body.py `_parsed`), and whether the held path did it."""
    body = bodies.parse(scope, raw, _plain)
    if body is not None:
        return body, True
    body = parse_json_object(raw)
    bodies.keep(scope, raw, body)
    return body, False


def _turn(i: int) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": f"step {i}: ran `ls ]}}` é😀",
             "tool_calls": [{"id": f"c{i}", "type": "function",
                             "function": {"name": "sh", "arguments": '{"cmd": "cat \\"a]\\""}'}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "[1, {2}]\n\"quoted\""},
            {"role": "user", "content": f"go on {i}"}]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_an_agent_loop_is_parsed_past_what_it_resends(fmt: str, layout: str) -> None:
    bodies, messages = ResentBodies(), [PAD, {"role": "user", "content": "start"}]
    previous: list[dict[str, Any]] = []
    for i in range(6):
        raw = _encoded(LAYOUTS[layout](messages), fmt)
        body, reused = _read(bodies, raw)
        assert body == json.loads(raw)
        assert reused == (i > 0)
        # The shared messages are the held dicts themselves (compaction/resend/previous.py compares by
        # identity).
        assert all(a is b for a, b in zip(previous, body["messages"], strict=False))
        previous = body["messages"]
        messages = messages + _turn(i)


def test_an_identical_resend_is_reused_whole() -> None:
    bodies = ResentBodies()
    raw = _encoded({"model": "m", "messages": [PAD, {"role": "user", "content": "hi"}]}, "spaced")
    first, _ = _read(bodies, raw)
    again, reused = _read(bodies, raw)
    assert reused and again == json.loads(raw) and again["messages"][0] is first["messages"][0]


@pytest.mark.parametrize("edit", ["an earlier message", "a parameter before the messages",
                                  "the last message"])
def test_an_edited_body_is_parsed_in_full(edit: str) -> None:
    bodies = ResentBodies()
    messages = [PAD, {"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}]
    _read(bodies, _encoded({"model": "m", "messages": messages}, "compact"))
    edits: dict[str, dict[str, Any]] = {
        "an earlier message": {"messages": [PAD, {"role": "user", "content": "ONE"}, *messages[2:]]},
        "a parameter before the messages": {"model": "n", "messages": messages},
        "the last message": {"messages": [*messages[:2], {"role": "assistant", "content": "2"}]}}
    changed = edits[edit]
    raw = _encoded({"model": "m", **changed}, "compact")
    body, reused = _read(bodies, raw)
    # The last message alone changed (a moved cache mark, say): the parse resumes before it.
    assert reused == (edit == "the last message") and body == json.loads(raw)


def test_held_bodies_are_not_reused_for_another_tenant() -> None:
    bodies = ResentBodies()
    messages = [PAD, {"role": "user", "content": "one"}]
    _read(bodies, _encoded({"messages": messages}, "compact"), scope="tenant-a")
    raw = _encoded({"messages": [*messages, {"role": "user", "content": "two"}]}, "compact")
    assert bodies.parse("tenant-b", raw, _plain) is None
    assert bodies.parse("tenant-a", raw, _plain) == json.loads(raw)


def test_a_duplicated_messages_key_is_never_mistaken_for_the_held_array() -> None:
    """JSON keeps the last of two equal keys: a body whose first `messages` array is not the one its
    parse kept is not held, so a resend of that first array is parsed in full."""
    bodies = ResentBodies()
    first = [PAD, {"role": "user", "content": "first array"}]
    raw = (b'{"messages":' + orjson.dumps(first) + b',"model":"m","messages":'
           + orjson.dumps([{"role": "user", "content": "second array"}]) + b"}")
    _read(bodies, raw)
    resend = orjson.dumps({"messages": [*first, {"role": "user", "content": "more"}], "model": "m"})
    body, reused = _read(bodies, resend)
    assert not reused and body == json.loads(resend)


def test_a_messages_key_nested_before_the_messages_forgoes_the_reuse() -> None:
    bodies = ResentBodies()
    tools = [{"type": "function", "function": {"name": "t", "parameters": {
        "type": "object", "properties": {"messages": {"type": "array"}}}}}]
    messages = [PAD, {"role": "user", "content": "one"}]
    for extra in ([], [{"role": "user", "content": "two"}]):
        raw = _encoded({"tools": tools, "model": "m", "messages": [*messages, *extra]}, "compact")
        body, reused = _read(bodies, raw)
        assert not reused and body == json.loads(raw)


def test_held_bodies_stay_within_their_bound() -> None:
    bodies = ResentBodies(max_bytes=1_000_000)
    for i in range(40):
        messages = [PAD, {"role": "user", "content": f"conversation {i}"}]
        _read(bodies, _encoded({"messages": messages}, "compact"))
        assert bodies.held_bytes <= 1_000_000
    assert bodies.held_bytes > 0


# -- property: whatever is sent next, a body the held path returns is the full parse ----------------

_TEXT = st.text(st.sampled_from('ab "\\[]{},:é😀\n\t/'), max_size=12)
_MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool"]), "content": _TEXT},
                                 optional={"name": _TEXT, "n": st.integers(-5, 2**70)})
_NEXT = st.sampled_from(["append", "same", "edit", "drop", "params", "cut", "garbage", "duplicate",
                         "reorder"])


def _next_raw(kind: str, messages: list[Message], new: list[Message], fmt: str,
              layout: str) -> bytes:
    """The next body, as the client sends it after `messages` (`kind` of change)."""
    follow = {"append": [*messages, *new], "same": messages, "edit": [PAD, *new, *messages[1:]],
              "drop": messages[:-1] or [PAD]}.get(kind, messages)
    body = LAYOUTS[layout](follow)
    if kind == "params":
        body = {"temperature": 1, **body}
    raw = _encoded(body, fmt)
    if kind == "cut":
        return raw[:-3]
    if kind == "garbage":
        return raw[:-1] + b", nan}"
    if kind == "duplicate":
        return raw[:-1] + b', "messages": [{"role": "user", "content": "x"}]}'
    if kind == "reorder":
        return _encoded(dict(reversed(body.items())), fmt)
    return raw


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=st.lists(_MESSAGE, min_size=0, max_size=4), steps=st.lists(
    st.tuples(_NEXT, st.lists(_MESSAGE, max_size=3)), min_size=1, max_size=4),
    fmt=st.sampled_from(list(FORMATS)), layout=st.sampled_from(list(LAYOUTS)))
def test_a_reused_parse_is_always_the_full_parse(first: list[dict[str, Any]],
                                                 steps: list[tuple[str, list[dict[str, Any]]]],
                                                 fmt: str, layout: str) -> None:
    bodies, messages = ResentBodies(), [PAD, *first]
    _read(bodies, _encoded(LAYOUTS[layout](messages), fmt))
    for kind, new in steps:
        raw = _next_raw(kind, messages, new, fmt, layout)
        try:
            expected = json.loads(raw)
        except ValueError:
            assert bodies.parse("tenant-a", raw, _plain) is None
            continue
        got = bodies.parse("tenant-a", raw, _plain)
        if got is None:
            got = parse_json_object(raw)
            bodies.keep("tenant-a", raw, got)
        assert got == expected
        messages = got["messages"]
