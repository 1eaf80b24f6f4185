"""The validation memo (compaction/messages.py `ValidMessages`): keyed by exact JSON, bounded, and never
a way around the list's own checks."""

from __future__ import annotations

from typing import Any

import pytest

from compaction.messages import ValidMessages, validate_messages
from config.errors import InvalidRequestError
from store.encoding.running_hashes import exact_keys
from tests.compaction.conftest import asst, sys, tool, user


def test_a_message_known_valid_is_not_walked_again() -> None:
    memo = ValidMessages()
    bad: dict[str, Any] = {"role": "user", "content": 7}
    with pytest.raises(InvalidRequestError):
        validate_messages([bad], exact_keys([bad]), memo)
    assert len(memo) == 0  # a failure is never remembered
    memo.remember([k for k in exact_keys([bad]) if k is not None])  # what only a walk could refute
    assert validate_messages([bad], exact_keys([bad]), memo) == [bad]  # so the memo was consulted
    with pytest.raises(InvalidRequestError):
        validate_messages([bad], None, memo)  # without keys every message is walked


def test_passing_messages_are_remembered_by_their_exact_json() -> None:
    memo = ValidMessages()
    msgs = [sys(), user("hi"), asst("hello")]
    validate_messages(msgs, exact_keys(msgs), memo)
    assert memo.known(exact_keys(msgs)) == [True, True, True]
    reordered = [{"content": "hi", "role": "user"}]  # same value, other bytes: only a miss
    assert memo.known(exact_keys(reordered)) == [False]
    floats: list[dict[str, Any]] = [{"role": "user", "content": "x", "weight": 0.5}]
    validate_messages(floats, exact_keys(floats), memo)
    assert exact_keys(floats) == [None] and memo.known([None]) == [False]


def test_the_lists_own_check_runs_on_remembered_messages() -> None:
    memo = ValidMessages()
    answered = [user("q"), asst(None, ["c1"]), tool("c1", "r")]
    validate_messages(answered, exact_keys(answered), memo)
    orphan = [user("q"), tool("c1", "r")]  # every message known valid, the pairing is not
    with pytest.raises(InvalidRequestError) as err:
        validate_messages(orphan, exact_keys(orphan), memo)
    assert err.value.param == "messages[1].tool_call_id"


def test_the_memo_is_bounded_in_bytes() -> None:
    memo = ValidMessages(max_bytes=2_000)
    for i in range(200):
        msgs = [user(f"message number {i} " * 5)]
        validate_messages(msgs, exact_keys(msgs), memo)
    assert 0 < memo.held_bytes <= 2_000 and len(memo) < 200
    newest = [user("message number 199 " * 5)]
    assert memo.known(exact_keys(newest)) == [True]  # least recently used go first
