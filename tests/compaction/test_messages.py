"""validate_messages: errors name the JSON path; accessors."""

from __future__ import annotations

from typing import Any

import pytest

from compaction.messages import is_pinned, strip_private_fields, validate_messages
from config.errors import InvalidRequestError
from store.encoding.content import message_text

CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def test_valid_conversation_passes_unchanged() -> None:
    msgs = [{"role": "system", "content": "s"},
            {"role": "developer", "content": [{"type": "text", "text": "d"}]},
            {"role": "user", "content": [{"type": "text", "text": "hi"},
                                         {"type": "image_url", "image_url": {"url": "https://x/y.png"}}],
             "pinned": True},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
            {"role": "assistant", "content": "done", "name": "bot"}]
    assert validate_messages(msgs) is msgs


@pytest.mark.parametrize(("raw", "param"), [
    (None, "messages"), ({}, "messages"), ([], "messages"), (["x"], "messages[0]"),
    ([{"role": "robot", "content": "x"}], "messages[0].role"),
    ([{"role": "user"}], "messages[0].content"),
    ([{"role": "user", "content": "a"}, {"role": "user", "content": 5}], "messages[1].content"),
    ([{"role": "user", "content": [{"text": "x"}]}], "messages[0].content[0].type"),
    ([{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}],
     "messages[0].content[0].type"),
    ([{"role": "user", "content": [{"type": "text", "text": 3}]}], "messages[0].content[0].text"),
    ([{"role": "user", "content": [{"type": "image_url"}]}], "messages[0].content[0].image_url"),
    ([{"role": "tool", "content": "x"}], "messages[0].tool_call_id"),
    ([{"role": "user", "content": "x", "pinned": "yes"}], "messages[0].pinned"),
    ([{"role": "assistant", "content": None, "tool_calls": {}}], "messages[0].tool_calls"),
    ([{"role": "assistant", "content": None, "tool_calls": [{**CALL, "id": ""}]}],
     "messages[0].tool_calls[0].id"),
    ([{"role": "assistant", "content": None, "tool_calls": [{**CALL, "type": "code"}]}],
     "messages[0].tool_calls[0].type"),
    ([{"role": "assistant", "content": None, "tool_calls": [{"id": "a", "type": "function"}]}],
     "messages[0].tool_calls[0].function"),
    ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
      {"role": "assistant", "content": None,
       "tool_calls": [{**CALL, "function": {"name": "f", "arguments": {"a": 1}}}]}],
     "messages[2].tool_calls[0].function.arguments"),
    ([{"role": "assistant", "content": None, "tool_calls": [{**CALL, "function": {"arguments": "{}"}}]}],
     "messages[0].tool_calls[0].function.name"),
    ([{"role": "function", "content": "x"}], "messages[0].name"),
])
def test_invalid_messages_name_the_path(raw: Any, param: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        validate_messages(raw)
    assert info.value.param == param
    assert info.value.status == 400
    assert param.split(".")[-1].split("[")[0] in info.value.message


def test_accessors() -> None:
    msg = {"role": "assistant", "content": [{"type": "text", "text": "Looking"}], "pinned": True,
           "tool_calls": [{**CALL, "function": {"name": "search", "arguments": '{"q": "ORD-1"}'}}]}
    assert is_pinned(msg) and not is_pinned({"role": "user", "content": "x"})
    stripped = strip_private_fields(msg)
    assert "pinned" not in stripped and "pinned" in msg
    assert message_text(msg) == 'Looking\nsearch({"q": "ORD-1"})'


def test_elision_cuts_input_text_parts() -> None:
    from compaction.tokens import TokenCounter
    from compaction.view.elision import elide
    from compaction.view.plan import Slot
    counter = TokenCounter.for_model("gpt-4o")
    message = {"role": "user", "content": [{"type": "input_text", "text": "word " * 500}]}
    slot = Slot(message=message, tokens=counter.count_message(message), category="fresh_tail", group=1,
                protected=False, ref="7")
    cut = elide(slot, slot.tokens // 2, counter, None)
    assert slot.tokens // 3 < cut.tokens <= slot.tokens // 2  # a long excerpt, never a husk
    assert "tokens of message 7 elided here" in str(cut.message["content"])


def test_a_system_message_between_a_call_and_its_result_leaves_the_round_open() -> None:
    msgs = [{"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "system", "content": "note"},
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]
    assert validate_messages(msgs) is msgs
    closed = [*msgs[:2], {"role": "user", "content": "x"}, msgs[3]]
    with pytest.raises(InvalidRequestError, match="no preceding assistant tool call"):
        validate_messages(closed)
