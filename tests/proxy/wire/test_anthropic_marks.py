"""Cache marks on Messages turns (proxy/wire/anthropic.py): a mark the client moves changes neither
the canonical messages (identity, the resend comparison) nor what is forwarded: each request's own
marks go back where the client put them, on turns forwarded unchanged."""

from __future__ import annotations

from typing import Any

from proxy.wire.anthropic import from_messages, to_messages, with_client_marks
from store.encoding.identity import chain_hashes

JSON = dict[str, Any]
MARK = {"type": "ephemeral"}


def _body(marked_at: int) -> JSON:
    """A Claude-Code-like body with the cache mark on message `marked_at`'s last block."""
    messages: list[JSON] = [
        {"role": "user", "content": [{"type": "text", "text": "fix the test"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "reading"},
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"c": "ls"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]},
    ]
    last = messages[marked_at]["content"][-1]
    messages[marked_at]["content"][-1] = {**last, "cache_control": MARK}
    return {"system": [{"type": "text", "text": "You are Claude Code.", "cache_control": MARK}],
            "messages": messages}


def test_a_moved_mark_leaves_the_canonical_messages_alike() -> None:
    first, second = to_messages(_body(0)), to_messages(_body(2))
    assert first == second
    assert chain_hashes(first) == chain_hashes(second)


def test_the_request_s_own_marks_are_forwarded_where_the_client_put_them() -> None:
    for marked_at in (0, 1, 2):
        body = _body(marked_at)
        system, turns = from_messages(to_messages(body))
        assert with_client_marks(turns, body["messages"]) == body["messages"]
        assert system == body["system"]


def test_a_turn_the_engine_changed_gets_no_mark_of_another_turn() -> None:
    body = _body(2)
    _, turns = from_messages(to_messages(body))
    turns[-1] = {"role": "user", "content": [{"type": "text", "text": "summarised"}]}
    assert with_client_marks(turns, body["messages"])[-1] == turns[-1]
    assert with_client_marks(turns[1:], body["messages"])[0] == turns[1]  # fewer turns: aligned at the end
