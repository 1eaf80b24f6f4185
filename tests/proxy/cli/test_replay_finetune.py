"""`ctxproxy replay` over OpenAI's fine-tuning JSONL: one `{"messages": [...]}` a line, no id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proxy.cli.main import main
from proxy.cli.replay import EXIT_ERROR

JSON = dict[str, Any]
OUTPUT = " ".join(f"def handler_{i}(): return {i}" for i in range(60))
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


def finetune_line(rounds: int) -> JSON:
    """One training example as OpenAI's fine-tuning format writes it (tools, `weight` on replies)."""
    messages: list[JSON] = [{"role": "system", "content": "Agent."}, {"role": "user", "content": "go"}]
    for n in range(rounds):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        messages += [{"role": "assistant", "content": None, "tool_calls": [call], "weight": 0},
                     {"role": "tool", "tool_call_id": f"c{n}", "content": OUTPUT}]
    messages.append({"role": "assistant", "content": "done", "weight": 1})
    return {"messages": messages, "tools": TOOLS, "parallel_tool_calls": False}


def _write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_ctxproxy_replay_reads_fine_tuning_jsonl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "train.jsonl", [finetune_line(14), finetune_line(1), finetune_line(3)])
    code = main(["replay", str(path), "--window", "3000", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    convs = json.loads(captured.out)["conversations"]
    assert [c["conversation"] for c in convs] == ["line-1", "line-2", "line-3"]
    assert all(c["errors"] == 0 and c["over_budget"] == 0 and c["pairing_violations"] == 0 for c in convs)
    last = convs[0]["per_request"][-1]
    assert last["tokens_received"] > last["budget"] >= last["tokens_forwarded"]


@pytest.mark.parametrize(("row", "why"), [
    ({"prompt": "hi", "completion": "there"}, 'expected {"messages": [...]}'),
    ({"messages": "hi"}, "messages must be a list of chat messages"),
    ({"messages": [{"content": "no role"}]}, "messages must be a list of chat messages"),
    ([1, 2], 'expected {"messages": [...]}'),
])
def test_a_line_in_neither_format_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   row: Any, why: str) -> None:
    path = _write(tmp_path / "mixed.jsonl", [finetune_line(1), row])
    code = main(["replay", str(path)])
    captured = capsys.readouterr()
    assert code == EXIT_ERROR and captured.out == ""
    assert captured.err.startswith(f"ctxproxy replay: {path}:2: ") and why in captured.err
    assert "Traceback" not in captured.err and "Error(" not in captured.err


def test_training_weights_are_not_replayed(tmp_path: Path) -> None:
    from proxy.cli.replay_bodies import read_any

    (conv,) = read_any(_write(tmp_path / "train.jsonl", [finetune_line(2)]))
    assert conv.id == "line-1" and conv.tools == tuple(TOOLS)
    assert all("weight" not in m for m in conv.messages) and conv.messages[-1]["content"] == "done"
