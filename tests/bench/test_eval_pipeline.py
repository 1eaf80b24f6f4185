"""`make eval`'s pipeline on one small agent loop: jobs, figures, gate and the results section; the
fake LLM summarizers; the gate's rules on hand-made rows."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bench import eval as bench_eval
from bench import eval_gate, results_doc
from bench.agentloop.build import generate_loop
from bench.eval_sets import Job, quarter_window
from bench.fake_summarizers import FAIL_CYCLE, GARBAGE_SUMMARY, HalfFailingSummarizer
from compaction.types import SummaryRequest
from config.errors import SummarizerError
from replay.facts import fact_like_tokens
from replay.run import ReplayOptions

REQUEST = SummaryRequest("s", "<text>\n[#1 user]\nThe batch LOT-1 closed late.\n</text>", 50, "v1", "normal")


def _outcomes(fake: HalfFailingSummarizer, n: int) -> list[str]:
    out = []
    for _ in range(n):
        try:
            out.append(asyncio.run(fake.complete(REQUEST)))
        except SummarizerError:
            out.append("raised")
    return out


def test_half_failing_fakes_fail_exactly_half_deterministically() -> None:
    raising = _outcomes(HalfFailingSummarizer("raise"), 12)
    assert raising.count("raised") == 6 == sum(FAIL_CYCLE) * 2
    assert [o == "raised" for o in raising[:6]] == list(FAIL_CYCLE)
    garbage = _outcomes(HalfFailingSummarizer("garbage"), 12)
    assert garbage.count(GARBAGE_SUMMARY) == 6 and "raised" not in garbage
    assert {"2031-07-19", "services/refunds/refund_gate_v9.py"} <= fact_like_tokens(GARBAGE_SUMMARY)


@pytest.fixture(scope="module")
def small_run() -> dict[str, Any]:
    conv = generate_loop(5, "pt", target_tokens=8_000)
    options = ReplayOptions(window=quarter_window(conv, "gpt-4o-mini"))
    names = ("ctxproxy+half-failing", "sliding_window", "passthrough")
    jobs = [Job("loops", conv, s, options) for s in names]
    runs = [bench_eval.run_job(job) for job in jobs]
    assert all(cpu > 0 for _, _, cpu in runs)
    return bench_eval.figures([(s, r) for s, r, _ in runs])


@pytest.mark.slow
def test_figures_rows_and_gate_on_a_small_agent_loop(small_run: dict[str, Any]) -> None:
    rows = {r["strategy"]: r for r in small_run["rows"]}
    assert set(rows) == {"ctxproxy+half-failing", "sliding_window", "passthrough"}
    assert rows["passthrough"]["k1"] == 1.0 and rows["passthrough"]["over_budget"] > 0
    ctx = rows["ctxproxy+half-failing"]
    assert ctx["over_window"] > 5 and ctx["planted_total"] == 10 and sum(ctx["steps"].values()) > 0
    assert ctx["over_budget"] == 0 and ctx["pairing_violations"] == 0 and ctx["invented"] == 0
    assert abs(sum(ctx["step_shares"].values()) - 1) < 1e-9
    (versus,) = small_run["versus_window"]
    assert versus["strategy"] == "ctxproxy+half-failing" and "ci95" in versus["k1"]
    assert [p for p in eval_gate.failures(small_run["rows"]) if "placeholders" not in p] == []


@pytest.mark.slow
def test_results_section_is_replaced_in_place(small_run: dict[str, Any], tmp_path: Path) -> None:
    doc = tmp_path / "results.md"
    doc.write_text("# ctxproxy results\n\n<!-- bench:start -->\nkept\n<!-- bench:end -->\n")
    meta = {"sets": {"loops": ["loop-pt-5"]}, "model": "gpt-4o-mini", "seed": 5, "seconds": 1.0,
            "workers": 1, "gate": "passed", "problems": []}
    results_doc.update(doc, small_run, meta)
    results_doc.update(doc, small_run, meta)
    text = doc.read_text()
    assert text.count(results_doc.BEGIN) == 1 and "<!-- bench:start -->\nkept" in text
    assert "Agent-loop set" in text and "forced_truncation" in text and "**Gate: passed.**" in text


def _row(strategy: str, **over: Any) -> dict[str, Any]:
    base = {"set": "real", "conversation": "s1", "strategy": strategy, "k1": 0.9, "k3": 0.9,
            "placeholder_share": 0.0, "over_budget": 0, "pairing_violations": 0, "invented_facts": [],
            "errors": [], "missing_facts": [], "stale_as_current": []}
    return {**base, **over}


def test_gate_rules() -> None:
    window = _row("sliding_window")
    assert eval_gate.failures([window, _row("ctxproxy")]) == []
    assert eval_gate.failures([window, _row("passthrough", over_budget=9)]) == []  # baselines never fail
    found = eval_gate.failures([window, _row("ctxproxy", k3=0.89, placeholder_share=0.05,
                                             invented_facts=["OPS-77123-z"], pairing_violations=1)])
    assert len(found) == 4 and all(f.startswith("ctxproxy real/s1: ") for f in found)
    loops = [_row("sliding_window", set="loops"), _row("ctxproxy", set="loops", k1=0.1)]
    assert eval_gate.failures(loops) == []  # retention is gated on real sessions only
    assert eval_gate.failures([], real_missing=True)[0].startswith("real sessions: none found")
