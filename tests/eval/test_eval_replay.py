"""Replay through the real engine: `ctxproxy replay` end to end, and ctxproxy's guarantees."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import sys
from pathlib import Path

import pytest

from bench.fake_summarizers import INVENTED_LINE, FailingSummarizer, InventingSummarizer
from bench.generator import generate_conversation
from compaction.types import Summarizer
from proxy.cli import replay as cli_replay
from replay.records import read_jsonl
from replay.report import ConversationReport
from replay.run import ReplayOptions, replay_engine, request_points

SAMPLE = Path(__file__).with_name("sample.jsonl")


def _run_cli(*argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    cli_replay.add_parser(parser.add_subparsers())
    args = parser.parse_args(["replay", *argv])
    out = io.StringIO()
    return args.func(args, env={}, out=out), out.getvalue()


@pytest.mark.slow
def test_replay_cli_json_and_chart(tmp_path: Path) -> None:
    chart = tmp_path / "replay.png"
    code, out = _run_cli(str(SAMPLE), "--window", "6000", "--json", "--chart", str(chart))
    assert code == 0
    (conv,) = json.loads(out)["conversations"]
    requests = request_points(read_jsonl(SAMPLE)[0].messages)
    assert conv["requests"] == len(conv["per_request"]) == len(requests)
    assert conv["over_budget"] == 0 and conv["pairing_violations"] == 0 and conv["invented"] == 0
    assert all(r["tokens_forwarded"] <= r["budget"] for r in conv["per_request"])
    assert conv["per_request"][-1]["tokens_received"] > conv["per_request"][-1]["budget"]
    assert conv["summarizer_calls"] > 0 and {"anchors", "summaries"} <= set(conv["per_turn"][-1]["occupancy"])
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_chart_without_matplotlib_says_how_to_install_it_before_replaying(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as in a default install
    chart = tmp_path / "replay.png"
    code, out = _run_cli(str(SAMPLE), "--window", "6000", "--chart", str(chart))
    assert code == cli_replay.EXIT_ERROR and out == "" and not chart.exists()
    assert "pip install 'ctxproxy[charts]'" in capsys.readouterr().err


def test_replay_cli_table_and_bad_file(tmp_path: Path) -> None:
    code, out = _run_cli(str(SAMPLE), "--window", "6000", "--limit", "1")
    assert code == 0 and "facts in final context" in out and "requests over budget" in out
    code, _ = _run_cli(str(tmp_path / "missing.jsonl"))
    assert code == cli_replay.EXIT_ERROR


@pytest.mark.parametrize("summarizer", [InventingSummarizer(), FailingSummarizer()],
                         ids=["inventing", "failing"])
def test_adversarial_summarizer_never_reaches_the_provider(summarizer: Summarizer) -> None:
    conv = read_jsonl(SAMPLE)[0]
    report = asyncio.run(replay_engine(conv, ReplayOptions(window=6_000), summarizer=summarizer))
    assert report.invented == () and report.over_budget == 0 and report.pairing_violations == 0
    assert report.summarizer_calls > 0 and "Zebulon" in INVENTED_LINE
    if isinstance(summarizer, InventingSummarizer):  # its output was seen and refused
        assert sum(t.rejections for t in report.turns) > 0


@pytest.fixture(scope="module")
def long_replay() -> ConversationReport:
    conv = generate_conversation(2026, n_turns=150, target_tokens=40_000)
    return asyncio.run(replay_engine(conv, ReplayOptions(window=12_000)))


@pytest.mark.slow
def test_150_turns_12k_window_every_request_fits_and_pairs(long_replay: ConversationReport) -> None:
    report = long_replay
    assert len(report.requests) > 150
    assert report.over_budget == 0 and report.pairing_violations == 0
    assert report.missing_system_or_last_user == 0 and report.invented == ()
    assert report.final_compression_ratio > 3


@pytest.mark.slow
def test_150_turns_12k_window_every_planted_fact_is_in_final_context(
        long_replay: ConversationReport) -> None:
    facts = long_replay.facts
    assert [f.fact for f in facts if not f.present] == []
    assert all(f.current for f in facts if f.must_be_current)


def test_replay_async_mode_keeps_the_budget_without_draining() -> None:
    conv = read_jsonl(SAMPLE)[0]
    report = asyncio.run(replay_engine(conv, ReplayOptions(window=6_000, background=True)))
    assert report.over_budget == 0 and report.pairing_violations == 0
    assert len(report.turns) == len(report.requests) == len(request_points(conv.messages))
