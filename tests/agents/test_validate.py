"""The scripted provider's checks reject what the real providers reject (these run in `make test` too)."""

from __future__ import annotations

from typing import Any

from tests.agents import validate

JSON = dict[str, Any]


def _use(call_id: str) -> JSON:
    """A tool_use block."""
    return {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": "ls"}}


def _result(call_id: str) -> JSON:
    """A tool_result block answering `call_id`."""
    return {"type": "tool_result", "tool_use_id": call_id, "content": "a.txt"}


def test_anthropic_paired_turns_pass() -> None:
    """A tool round answered in the next user turn, a system note between turns, 4 marks: accepted."""
    mark = {"cache_control": {"type": "ephemeral"}}
    body = {"max_tokens": 100, "system": [{"type": "text", "text": "s", **mark}],
            "tools": [{"name": "Bash", **mark}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "go", **mark}]},
                         {"role": "system", "content": "a note"},
                         {"role": "assistant", "content": [_use("t1")]},
                         {"role": "user", "content": [{**_result("t1"), **mark}]}]}
    assert validate.anthropic_violations(body) == []


def test_anthropic_breaks_are_found() -> None:
    """An unanswered tool_use, an orphan tool_result, two user turns in a row and a fifth mark."""
    mark = {"cache_control": {"type": "ephemeral"}}
    body = {"max_tokens": 100, "system": [{"type": "text", "text": "s", **mark}] * 5,
            "messages": [{"role": "user", "content": "go"},
                         {"role": "assistant", "content": [_use("t1")]},
                         {"role": "user", "content": [_result("t2")]},
                         {"role": "user", "content": "again"}]}
    problems = " | ".join(validate.anthropic_violations(body))
    for expected in ("unanswered", "without tool_use", "two user messages", "5 cache_control"):
        assert expected in problems


def test_responses_pairing() -> None:
    """A function_call needs its output after it; an output needs its call before it."""
    call = {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
    assert validate.responses_violations({"input": [call, output]}) == []
    assert validate.responses_violations({"input": [output, call]}) != []
    assert validate.responses_violations({"input": [call]}) == ["call c1 has no output"]


def test_chat_pairing() -> None:
    """Tool messages answer the assistant's calls right after it, and only those."""
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    asked = {"role": "assistant", "content": None, "tool_calls": [call]}
    answer = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    user = {"role": "user", "content": "next"}
    assert validate.chat_violations({"messages": [user, asked, answer, user]}) == []
    assert validate.chat_violations({"messages": [user, asked, user]}) != []
    assert validate.chat_violations({"messages": [user, answer]}) != []


def test_reasoning_before_its_call() -> None:
    """A call issued with a reasoning item needs that item before it when sent back."""
    issued = {"c1": "rs_1"}
    call = {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"}
    reasoning = {"type": "reasoning", "id": "rs_1", "encrypted_content": "x"}
    assert validate.reasoning_violations({"input": [reasoning, call]}, issued) == []
    assert validate.reasoning_violations({"input": [call]}, issued) != []
