"""`ctxproxy replay` over request logs: bodies of any of the three APIs, one a line."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import pytest

from proxy.cli import replay as cli_replay
from proxy.cli.replay_bodies import read_any
from proxy.wire.bodies import api_of

JSON = dict[str, Any]
OUTPUT = " ".join(f"def handler_{i}(): return {i}" for i in range(60))


def chat_bodies(rounds: int) -> list[JSON]:
    """What an agent logs: the whole history again on every request."""
    messages: list[JSON] = [{"role": "system", "content": "Agent."}, {"role": "user", "content": "go"}]
    bodies = []
    for n in range(rounds):
        bodies.append({"model": "gpt-4o-mini", "messages": list(messages), "tools": []})
        call = {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": OUTPUT},
        ]
    return bodies


def responses_bodies(rounds: int) -> list[JSON]:
    items: list[JSON] = [{"role": "user", "content": "go"}]
    bodies = []
    for n in range(rounds):
        bodies.append(
            {
                "model": "gpt-4o-mini",
                "instructions": "Agent.",
                "input": list(items),
                "tools": [{"type": "function", "name": "bash", "parameters": {}}],
            }
        )
        items += [
            {"type": "reasoning", "id": f"rs{n}", "summary": [], "encrypted_content": "x"},
            {"type": "function_call", "call_id": f"c{n}", "name": "bash", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"c{n}", "output": OUTPUT},
        ]
    return bodies


def messages_bodies(rounds: int) -> list[JSON]:
    turns: list[JSON] = [{"role": "user", "content": "go"}]
    bodies = []
    for n in range(rounds):
        bodies.append(
            {"model": "gpt-4o-mini", "max_tokens": 100, "system": "Agent.", "messages": list(turns)}
        )
        turns += [
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t", "signature": "s"},
                    {"type": "tool_use", "id": f"t{n}", "name": "bash", "input": {}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": OUTPUT}]},
        ]
    return bodies


def _write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _run_cli(*argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    cli_replay.add_parser(parser.add_subparsers())
    args = parser.parse_args(["replay", *argv])
    out = io.StringIO()
    return args.func(args, env={}, out=out), out.getvalue()


def test_each_api_is_recognised() -> None:
    assert [api_of(b[0]) for b in (chat_bodies(1), responses_bodies(1), messages_bodies(1))] == [
        "chat",
        "responses",
        "messages",
    ]


def test_a_messages_body_with_system_entries_is_still_messages() -> None:
    body = {"model": "claude", "system": "Be brief.",
            "messages": [{"role": "user", "content": "go"}, {"role": "system", "content": "MCP notes"}]}
    assert api_of(body) == "messages"
    chat = {"model": "gpt", "messages": [{"role": "system", "content": "x"},
                                         {"role": "tool", "tool_call_id": "a", "content": "y"}]}
    assert api_of(chat) == "chat"


@pytest.mark.parametrize("make", [chat_bodies, responses_bodies, messages_bodies])
def test_a_request_log_is_one_conversation_per_history(tmp_path: Path, make: Any) -> None:
    other = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "unrelated"}]}
    (first, second) = read_any(_write(tmp_path / "log.jsonl", [*make(6), other]))
    assert (first.id, second.id) == ("log-1", "log-2")
    roles = [m["role"] for m in first.messages]
    assert roles[:2] == ["system", "user"] and first.messages[0]["content"] == "Agent."
    assert roles.count("tool") == 5 and all("ctxproxy_" not in json.dumps(m) for m in first.messages)


@pytest.mark.parametrize("make", [chat_bodies, responses_bodies, messages_bodies])
def test_ctxproxy_replay_replays_a_request_log(tmp_path: Path, make: Any) -> None:
    code, out = _run_cli(str(_write(tmp_path / "log.jsonl", make(14))), "--window", "3000", "--json")
    assert code == 0
    (conv,) = json.loads(out)["conversations"]
    assert conv["requests"] >= 1 and conv["over_budget"] == 0 and conv["pairing_violations"] == 0
    assert conv["per_request"][-1]["tokens_received"] > conv["per_request"][-1]["budget"]


def test_a_malformed_body_is_reported_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [*chat_bodies(2), {"model": "m", "input": [{"role": "user", "content": "x"}, 5]}]
    code, out = _run_cli(str(_write(tmp_path / "bad.jsonl", rows)))
    assert code == cli_replay.EXIT_ERROR and out == ""
    assert "bad.jsonl:3:" in capsys.readouterr().err
    rows = [*chat_bodies(1), {"id": "x"}]
    code, _ = _run_cli(str(_write(tmp_path / "bad2.jsonl", rows)))
    assert code == cli_replay.EXIT_ERROR and "bad2.jsonl:2:" in capsys.readouterr().err
