"""The previous request's leading messages are reused only when they are exactly the request's own
(bytes and values), their keys are the request's exact JSON, and the memo stays within its bound."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest

from compaction.messages import validate_resent
from compaction.resend.previous import Resends
from compaction.types import Message
from config.errors import InvalidRequestError
from store.encoding.running_hashes import exact_keys

HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "be terse"},
    {"role": "user", "content": "look it up", "pinned": True},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "found"},
    {"role": "assistant", "content": "done", "n": 1},
]


def _copy(messages: list[Message]) -> list[Message]:
    """Fresh dicts, as the next request's body parse makes them."""
    out: list[dict[str, Any]] = orjson.loads(orjson.dumps(messages))
    return out


def _result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


def _seen(memo: Resends, messages: list[Message]) -> None:
    resent = memo.resent("t", None, messages)
    _, expected = validate_resent(resent.messages, resent.keys, valid=resent.shared, expected=resent.expected)
    memo.keep(resent, expected)


def test_a_resend_shares_the_previous_messages_and_their_exact_keys() -> None:
    memo = Resends()
    _seen(memo, HISTORY)
    request = [*_copy(HISTORY), {"role": "user", "content": "more"}]
    resent = memo.resent("t", None, request)
    assert resent.shared == len(HISTORY) and resent.expected == frozenset()
    assert all(a is b for a, b in zip(resent.messages, HISTORY, strict=False))  # the previous dicts
    assert resent.messages[-1] is request[-1]
    assert resent.keys == exact_keys(request)


@pytest.mark.parametrize("added", [[], [{"role": "user", "content": "more é"}],
                                   [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]])
def test_a_request_made_of_the_previous_dicts_encodes_only_what_follows(added: list[dict[str, Any]]) -> None:
    """A body parsed past its resent part (proxy/server/resent_body.py) hands on the previous dicts."""
    memo = Resends()
    _seen(memo, HISTORY)
    request = [*memo.resent("t", None, _copy(HISTORY)).messages, *added]
    resent = memo.resent("t", None, request)
    assert resent.shared == len(HISTORY) and resent.blob == orjson.dumps(request)
    assert resent.keys == exact_keys(request)


def test_a_tail_that_is_not_plain_json_after_the_previous_dicts_is_not_kept() -> None:
    memo = Resends()
    _seen(memo, HISTORY)
    request = [*memo.resent("t", None, _copy(HISTORY)).messages, {"role": "user", "content": "x", "n": 2**70}]
    resent = memo.resent("t", None, request)
    assert resent.blob is None and resent.shared == 0


@pytest.mark.parametrize(("index", "change"), [
    (4, {"role": "assistant", "content": "done", "n": 1.0}),  # 1 == 1.0, not the same JSON
    (4, {"role": "assistant", "content": "done", "n": True}),  # 1 == True
    (4, {"n": 1, "role": "assistant", "content": "done"}),  # another key order
    (4, {"role": "assistant", "content": "done", "n": None}),  # bytes differ ...
    (2, {"role": "assistant", "content": "edited"}),  # an edit in the middle
])
def test_only_the_exactly_equal_leading_messages_are_shared(index: int, change: dict[str, Any]) -> None:
    memo = Resends()
    _seen(memo, HISTORY)
    request = _copy(HISTORY)
    request[index] = change
    resent = memo.resent("t", None, request)
    assert resent.shared == index
    assert resent.keys == exact_keys(request)
    assert resent.messages[index:] == request[index:] and resent.messages[index] is request[index]


def test_nan_written_as_null_is_not_taken_for_null() -> None:
    memo = Resends()
    before = [{"role": "user", "content": "x", "score": None}]
    _seen(memo, before)
    request = [{"role": "user", "content": "x", "score": math.nan}]
    assert orjson.dumps(request) == orjson.dumps(before)  # orjson cannot tell them apart
    resent = memo.resent("t", None, request)
    assert resent.shared == 0 and resent.messages[0] is request[0] and resent.keys == [None]


def test_other_tenants_and_conversation_ids_share_nothing() -> None:
    memo = Resends()
    _seen(memo, HISTORY)
    assert memo.resent("other", None, _copy(HISTORY)).shared == 0
    assert memo.resent("t", "conv-1", _copy(HISTORY)).shared == 0


def test_validation_resumes_after_the_shared_messages() -> None:
    memo = Resends()
    _seen(memo, HISTORY[:3])  # ends with an open tool round (call c1)
    answered = memo.resent("t", None, [*_copy(HISTORY[:3]), _result("c1")])
    assert answered.expected == frozenset({"c1"})
    validate_resent(answered.messages, answered.keys, valid=answered.shared, expected=answered.expected)
    orphan = memo.resent("t", None, [*_copy(HISTORY[:3]), _result("c9")])
    with pytest.raises(InvalidRequestError, match=r"messages\[3\].tool_call_id"):
        validate_resent(orphan.messages, orphan.keys, valid=orphan.shared, expected=orphan.expected)
    bad = memo.resent("t", None, [*_copy(HISTORY[:3]), {"role": "user", "content": 5}])
    with pytest.raises(InvalidRequestError, match=r"messages\[3\].content"):
        validate_resent(bad.messages, bad.keys, valid=bad.shared, expected=bad.expected)


def test_bounded_in_bytes_least_recently_used_first_out() -> None:
    memo = Resends(max_bytes=6_000)
    for i in range(10):
        _seen(memo, [{"role": "system", "content": f"prompt {i}"}, {"role": "user", "content": "x" * 500}])
        assert memo.held_bytes <= 6_000
    assert 0 < len(memo) < 10
    assert memo.resent("t", None, [{"role": "system", "content": "prompt 9"},
                                   {"role": "user", "content": "x" * 500}]).shared == 2
    assert memo.resent("t", None, [{"role": "system", "content": "prompt 0"},
                                   {"role": "user", "content": "x" * 500}]).shared == 0
    huge = Resends(max_bytes=100)
    _seen(huge, HISTORY)
    assert len(huge) == 0 and huge.held_bytes == 0
    # a request that outgrows the bound lets its conversation's previous one go too
    growing = Resends(max_bytes=1_500)
    _seen(growing, HISTORY[:2])
    assert len(growing) == 1
    _seen(growing, [*HISTORY[:2], {"role": "user", "content": "y" * 2_000}])
    assert len(growing) == 0 and growing.held_bytes == 0


def test_a_request_that_is_not_plain_json_is_not_kept() -> None:
    memo = Resends()
    _seen(memo, [{"role": "user", "content": "x", "weight": 0.5}])
    assert len(memo) == 0
