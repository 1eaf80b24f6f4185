"""Atomic groups and the forwarded-list gate."""

from __future__ import annotations

import pytest

from compaction.toolpairs import group_messages, pairing_violations, validate_outgoing
from config.errors import CtxProxyError
from tests.compaction.conftest import asst, sys, tool, user


def test_parallel_results_in_any_order_form_one_group_and_nested_rounds_are_separate() -> None:
    msgs = [sys(), user("go"), asst(None, ["a", "b"]), tool("b", "2"), tool("a", "1"),
            asst(None, ["c"]), tool("c", "3"), asst("done")]
    kinds = [(g.start, g.end, g.kind) for g in group_messages(msgs)]
    assert kinds == [(0, 1, "system"), (1, 2, "user"), (2, 5, "tool_round"), (5, 7, "tool_round"),
                     (7, 8, "assistant")]
    assert pairing_violations(msgs) == []


def test_violations_are_named() -> None:
    msgs = [user("x"), tool("zz", "orphan"), asst(None, ["a", "b"]), tool("a", "1"), user("y")]
    assert pairing_violations(msgs) == [("orphan_result", "zz"), ("unanswered_call", "b")]


def test_dropping_a_result_is_rejected() -> None:
    received = [sys(), user("go"), asst(None, ["a", "b"]), tool("a", "1"), tool("b", "2"), user("next")]
    outgoing = [received[0], received[2], received[3], received[5]]
    with pytest.raises(CtxProxyError, match="unanswered_call 'b'"):
        validate_outgoing(outgoing, received)


def test_orphan_created_by_us_is_rejected_but_the_clients_own_orphan_passes() -> None:
    received = [user("go"), asst(None, ["a"]), tool("a", "1"), user("next")]
    with pytest.raises(CtxProxyError, match="orphan_result"):
        validate_outgoing([received[2], received[3]], received)
    clients_own = [user("go"), tool("q", "stray"), user("next")]
    validate_outgoing(clients_own, clients_own)


def test_system_and_last_message_must_survive() -> None:
    received = [sys("rules"), user("a"), asst("b"), user("c")]
    with pytest.raises(CtxProxyError, match="system message"):
        validate_outgoing(received[1:], received)
    with pytest.raises(CtxProxyError, match="last message"):
        validate_outgoing(received[:3], received)
    cut = {"role": "user", "content": "c\n[ctxproxy: 5 tokens truncated from message 4; x]"}
    validate_outgoing([received[0], cut], received)


def test_pinned_is_stripped_before_comparison() -> None:
    received = [{"role": "system", "content": "r", "pinned": True}, {**user("a"), "pinned": True}]
    validate_outgoing([sys("r"), user("a")], received)


def test_a_system_message_inside_a_tool_round_does_not_split_it() -> None:
    """A client's mid-round instruction (between a call and its results) stays in the round."""
    msgs = [sys(), user("go"), asst(None, ["a", "b"]), sys("note"), tool("a", "1"), sys("reminder"),
            tool("b", "2"), sys("after"), user("next")]
    kinds = [(g.start, g.end, g.kind) for g in group_messages(msgs)]
    assert kinds == [(0, 1, "system"), (1, 2, "user"), (2, 7, "tool_round"), (7, 8, "system"),
                     (8, 9, "user")]
    assert pairing_violations(msgs) == []
    validate_outgoing([msgs[0], msgs[1], msgs[3], msgs[5], msgs[7], msgs[2], msgs[4], msgs[6], msgs[8]],
                      msgs)


def test_a_call_followed_only_by_system_messages_is_unanswered() -> None:
    msgs = [user("go"), asst(None, ["a"]), sys("note"), user("next")]
    assert [g.kind for g in group_messages(msgs)] == ["user", "tool_round", "system", "user"]
    assert pairing_violations(msgs) == [("unanswered_call", "a")]
