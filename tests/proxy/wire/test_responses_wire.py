"""Responses input items <-> canonical chat messages: lossless round trip, tool rounds, opaque items."""

from __future__ import annotations

from typing import Any

import pytest

from compaction.messages import validate_messages
from compaction.toolpairs import pairing_violations
from config.errors import InvalidRequestError
from proxy.wire.responses import ITEMS_KEY, assistant_message, from_messages, input_items, to_messages

JSON = dict[str, Any]
REASONING: JSON = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA-blob"}
ITEMS: list[JSON] = [
    {"role": "developer", "content": "Be brief."},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"},
                                                    {"type": "input_image", "image_url": "data:x"}]},
    REASONING,
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell",
     "arguments": "{\"cmd\":\"ls\"}", "status": "completed"},
    {"type": "custom_tool_call", "id": "ctc_2", "call_id": "call_2", "name": "apply_patch", "input": "*** x"},
    {"type": "function_call_output", "call_id": "call_1", "output": "a.py\nb.py"},
    {"type": "custom_tool_call_output", "call_id": "call_2", "output": "patched"},
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "Two files.", "annotations": []}]},
    {"type": "item_reference", "id": "some_future_item"},
    {"role": "user", "content": "thanks"},
]


def test_round_trip_is_byte_identical_with_instructions() -> None:
    messages = to_messages(ITEMS, "You are Codex.")
    assert from_messages(messages) == ("You are Codex.", ITEMS)


def test_canonical_form_is_valid_chat_with_tool_rounds_paired() -> None:
    messages = [{k: v for k, v in m.items() if k != ITEMS_KEY} for m in to_messages(ITEMS)]
    validate_messages(messages)
    assert pairing_violations(messages) == []
    roles = [m["role"] for m in messages]
    assert roles == ["developer", "user", "assistant", "tool", "tool", "assistant", "user"]
    calls = messages[2]["tool_calls"]
    named = [(c["id"], c["function"]["name"]) for c in calls]
    assert named == [("call_1", "shell"), ("call_2", "apply_patch")]
    assert calls[1]["function"]["arguments"] == "*** x"
    assert messages[1]["content"][1] == {"type": "image_url", "image_url": {"url": "data:x"}}
    assert messages[5]["content"] == "Two files."  # assistant text and the opaque item after it


def test_a_reply_output_is_the_same_message_as_its_items_sent_back() -> None:
    output = [REASONING, ITEMS[7]]
    assert [assistant_message(output)] == to_messages(output)


def test_engine_made_and_shortened_messages_become_items() -> None:
    messages = to_messages(ITEMS)
    summary = {"role": "system", "content": "<summary>earlier turns</summary>"}
    shortened = {**messages[3], "content": "a.py [ctxproxy: 3 tokens elided]"}
    _, items = from_messages([summary, messages[2], shortened])
    assert items[0] == {"type": "message", "role": "system", "content": "<summary>earlier turns</summary>"}
    assert items[1:4] == ITEMS[2:5]  # reasoning and both calls untouched
    assert items[4] == {**ITEMS[5], "output": "a.py [ctxproxy: 3 tokens elided]"}


def test_bad_input_is_a_400_naming_the_item() -> None:
    assert input_items({"input": "hi"}) == [{"type": "message", "role": "user", "content": "hi"}]
    with pytest.raises(InvalidRequestError) as caught:
        to_messages([{"role": "user", "content": "x"}, 7])
    assert caught.value.param == "input[1]"
    with pytest.raises(InvalidRequestError):
        input_items({"input": {"role": "user"}})


def test_opaque_items_are_counted_in_the_budget() -> None:
    from compaction.tokens import TokenCounter

    counter = TokenCounter.for_model("gpt-4o-mini")
    big = {**REASONING, "encrypted_content": "gAAAA" + "Zm9vYmFy" * 400}
    with_reasoning = to_messages([big, ITEMS[7]])[0]
    without = to_messages([ITEMS[7]])[0]
    assert counter.count_message(with_reasoning) > counter.count_message(without) + 300
