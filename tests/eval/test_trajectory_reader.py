"""The real-trajectory format: told apart from the conversations format by its first line, malformed
lines reported with their number, and `ctxproxy replay` replaying such a file end to end."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import pytest

from compaction.types import Message
from config.errors import InvalidRequestError
from proxy.cli import replay as cli_replay
from replay.records import read_jsonl
from replay.trajectory import read_recorded

SAMPLE = Path(__file__).with_name("sample.jsonl")
TOOLS = [{"type": "function", "function": {"name": "bash", "description": "run a command",
                                           "parameters": {"type": "object", "properties": {
                                               "command": {"type": "string"}}}}}]


def _session(rounds: int) -> list[dict[str, Any]]:
    messages: list[Message] = [{"role": "system", "content": "You are a coding agent."},
                                      {"role": "user", "content": "Find why test_rounding fails."}]
    for n in range(rounds):
        call = {"id": f"call_{n}", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": f"cat src/mod_{n}.py"})}}
        messages += [{"role": "assistant", "content": "", "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": f"call_{n}",
                      "content": " ".join(f"def handler_{n}_{i}(): return {i}" for i in range(60))}]
    return messages + [{"role": "assistant", "content": "handler_3_7 is the culprit."}]


def _write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_trajectory_is_one_conversation_named_by_its_meta(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.jsonl", [{"meta": {"name": "toy-session"}}, {"tools": TOOLS}, *_session(3)])
    (conv,) = read_recorded(path)
    assert conv.id == "toy-session" and conv.tools == tuple(TOOLS) and conv.checks == ()
    assert conv.messages == tuple(_session(3))


def test_the_conversations_format_still_reads(tmp_path: Path) -> None:
    assert [c.to_dict() for c in read_recorded(SAMPLE)] == [c.to_dict() for c in read_jsonl(SAMPLE)]
    path = _write(tmp_path / "t.jsonl", [{"meta": {}}, *_session(1)])  # no tools line, no name
    (conv,) = read_recorded(path)
    assert conv.id == "t" and conv.tools == ()


@pytest.mark.parametrize(("rows", "line", "says"), [
    ([{"meta": {"name": "x"}}, {"tools": TOOLS}, {"role": "user", "content": "hi"}, {"content": "no role"}],
     4, "chat message"),
    ([{"meta": {"name": "x"}}, {"tools": "bash"}, {"role": "user", "content": "hi"}], 2, "tools"),
    ([{"meta": {"name": "x"}}, {"tools": TOOLS}], 1, "no messages"),
    ([{"id": "a", "messages": []}, {"no": "id"}], 2, "conversation"),
])
def test_a_malformed_line_is_reported_with_its_number(tmp_path: Path, rows: list[Any], line: int,
                                                      says: str) -> None:
    path = _write(tmp_path / "bad.jsonl", rows)
    with pytest.raises(InvalidRequestError) as caught:
        read_recorded(path)
    assert f"bad.jsonl:{line}:" in caught.value.message and says in caught.value.message
    assert caught.value.param == f"line {line}" and caught.value.code == "invalid_replay_file"


def test_a_line_that_is_not_json_is_reported_with_its_number(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text('{"meta": {}}\n\n{"role": "user", "content": "hi"\n', encoding="utf-8")
    with pytest.raises(InvalidRequestError, match=r"broken.jsonl:3: not JSON"):
        read_recorded(path)


def _run_cli(*argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    cli_replay.add_parser(parser.add_subparsers())
    args = parser.parse_args(["replay", *argv])
    out = io.StringIO()
    return args.func(args, env={}, out=out), out.getvalue()


def test_ctxproxy_replay_replays_a_trajectory_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.jsonl", [{"meta": {"name": "toy-session"}}, {"tools": TOOLS}, *_session(12)])
    code, out = _run_cli(str(path), "--window", "3000", "--json")
    assert code == 0
    (conv,) = json.loads(out)["conversations"]
    assert conv["conversation"] == "toy-session" and conv["requests"] == 13
    assert conv["over_budget"] == 0 and conv["pairing_violations"] == 0
    assert conv["per_request"][-1]["tokens_received"] > conv["per_request"][-1]["budget"]


def test_ctxproxy_replay_names_the_bad_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"meta": {"name": "x"}}, {"tools": TOOLS}, ["not", "a", "message"]]
    path = _write(tmp_path / "bad.jsonl", rows)
    code, out = _run_cli(str(path))
    assert code == cli_replay.EXIT_ERROR and out == ""
    assert "bad.jsonl:3:" in capsys.readouterr().err
