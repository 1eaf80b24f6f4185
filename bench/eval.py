"""`make eval`: ctxproxy against baselines on the same generated conversations, as a real check.

Runs the real engine (local/extractive, and adversarial summarisers: inventing, empty, verbose,
slow, failing), passthrough, a sliding window and litellm's trim_messages over N seeded
conversations; prints a table, writes bench/out/eval.json and charts, regenerates the eval section
of docs/results.md, and exits 1 when any ctxproxy variant misses a fact, presents a stale value,
forwards an invention, exceeds the budget or breaks tool pairing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench import charts, results_doc  # noqa: E402
from bench.fake_summarizers import ADVERSARIAL  # noqa: E402
from bench.generator import generate_suite  # noqa: E402
from bench.replay import replay_baseline  # noqa: E402
from proxy.cli.replay import quiet_logs  # noqa: E402
from replay.baselines import BASELINES  # noqa: E402
from replay.chart import turn_chart  # noqa: E402
from replay.records import RecordedConversation  # noqa: E402
from replay.report import ConversationReport, aggregate  # noqa: E402
from replay.run import ReplayOptions, replay_engine  # noqa: E402

OUT_DIR = Path("bench/out")
RESULTS_DOC = Path("docs/results.md")
CTXPROXY = "ctxproxy"
ENGINE_VARIANTS = (CTXPROXY, *(f"{CTXPROXY}+{name}" for name in ADVERSARIAL))
TRIM_STRIDE = 4  # litellm's trim_messages is quadratic in the history: check every 4th request


def run_job(job: tuple[str, RecordedConversation, ReplayOptions]) -> ConversationReport:
    """One (strategy, conversation) replay; runs in a worker process."""
    strategy, conv, options = job
    quiet_logs()
    if strategy in ENGINE_VARIANTS:
        fake = strategy.partition("+")[2]
        summarizer = ADVERSARIAL[fake]() if fake else None
        return asyncio.run(replay_engine(conv, options, summarizer=summarizer, strategy=strategy))
    if strategy == "trim_messages":
        options = replace(options, stride=TRIM_STRIDE)
    return replay_baseline(conv, strategy, BASELINES[strategy], options)


def run_all(conversations: Sequence[RecordedConversation], strategies: Sequence[str],
            options: ReplayOptions, workers: int) -> dict[str, list[ConversationReport]]:
    """Every strategy on every conversation, in parallel processes, grouped by strategy."""
    jobs = [(s, conv, options) for s in strategies for conv in conversations]
    jobs.sort(key=lambda j: j[0] != "trim_messages")  # the slowest first, for a better packing
    with ProcessPoolExecutor(max_workers=workers) as pool:
        reports = list(pool.map(run_job, jobs))
    grouped: dict[str, list[ConversationReport]] = {s: [] for s in strategies}
    for report in reports:
        grouped[report.strategy].append(report)
    return grouped


def failures(grouped: dict[str, list[ConversationReport]]) -> list[str]:
    """Why the gate fails: every ctxproxy defect, per conversation."""
    out: list[str] = []
    for strategy, reports in grouped.items():
        if not strategy.startswith(CTXPROXY):
            continue
        for r in reports:
            missing = [f"{f.kind}={f.fact}" for f in r.facts if not f.present]
            stale = [f"{f.kind}: {v}" for f in r.facts for v in f.stale_as_current]
            problems = {"missing facts": missing, "stale as current": stale, "invented": list(r.invented),
                        "over budget": [str(r.over_budget)] * bool(r.over_budget),
                        "pairing violations": [str(r.pairing_violations)] * bool(r.pairing_violations),
                        "errors": list(r.errors)}
            out += [f"{strategy} {r.conversation_id}: {k}: {', '.join(v)}" for k, v in problems.items() if v]
    return out


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def render_table(rows: Sequence[dict[str, Any]]) -> Table:
    table = Table(title="ctxproxy eval: same conversations, every strategy")
    for col in ("strategy", "facts retained", "corrections current", "invented fwd", "over budget",
                "pairing viol.", "compression", "prefix stable", "summ. calls/turn"):
        table.add_column(col, justify="left" if col == "strategy" else "right")
    for r in rows:
        table.add_row(r["strategy"], _pct(r["facts_retained"]), _pct(r["corrections_current"]),
                      str(r["invented"]), f"{r['over_budget']}/{r['requests']}",
                      str(r["pairing_violations"]), f"{r['compression_ratio']:.2f}x",
                      _pct(r["prefix_stability"]), f"{r['calls_per_turn']:.2f}")
    return table


def write_outputs(grouped: dict[str, list[ConversationReport]], rows: list[dict[str, Any]],
                  meta: dict[str, Any], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {"meta": meta, "aggregate": rows,
               "conversations": {s: [r.summary() | {"facts": [f.to_dict() for f in r.facts],
                                                    "invented_facts": list(r.invented)}
                                     for r in reports] for s, reports in grouped.items()}}
    json_path = out_dir / "eval.json"
    json_path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    paths = [json_path, charts.comparison_chart(rows, out_dir / "eval_comparison.png")]
    if grouped.get(CTXPROXY):
        paths.append(turn_chart(grouped[CTXPROXY][:1], out_dir / "eval_ctxproxy_turns.png"))
    if grouped.get("sliding_window"):
        paths.append(turn_chart(grouped["sliding_window"][:1], out_dir / "eval_sliding_turns.png"))
    return paths


def _copy(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return dst


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.eval", description=__doc__.splitlines()[0])
    p.add_argument("--conversations", type=int, default=6)
    p.add_argument("--turns", type=int, default=150)
    p.add_argument("--tokens", type=int, default=40_000, help="approximate tokens per conversation")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--model", default="gpt-4o-mini")
    p.add_argument("--window", type=int, default=12_000)
    p.add_argument("--workers", type=int, default=max(1, min(2, os.cpu_count() or 1)))
    p.add_argument("--strategies", default=",".join([*ENGINE_VARIANTS, *BASELINES]),
                   help="comma-separated subset")
    p.add_argument("--out", type=Path, default=OUT_DIR)
    p.add_argument("--docs", type=str, default=str(RESULTS_DOC), help="results doc to update ('' = none)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    strategies = [s for s in args.strategies.split(",") if s]
    conversations = generate_suite(args.conversations, args.seed, args.turns, args.tokens)
    options = ReplayOptions(model=args.model, window=args.window)
    grouped = run_all(conversations, strategies, options, args.workers)
    rows = [aggregate(grouped[s]) for s in strategies if grouped[s]]
    meta = {"conversations": args.conversations, "turns": args.turns, "tokens": args.tokens,
            "seed": args.seed, "model": args.model, "window": args.window,
            "options": {k: v for k, v in asdict(options).items() if k != "compaction"},
            "trim_stride": TRIM_STRIDE, "seconds": round(time.monotonic() - started, 1)}
    console = Console(width=200)
    console.print(render_table(rows))
    paths = write_outputs(grouped, rows, meta, args.out)
    problems = failures(grouped)
    meta["gate"] = f"FAILED ({len(problems)} ctxproxy defects, listed by the run)" if problems else "passed"
    if args.docs:
        docs = Path(args.docs)
        paths.append(results_doc.update(docs, rows, meta))
        chart = docs.parent / "img" / "eval_comparison.png"
        paths.append(_copy(args.out / "eval_comparison.png", chart))
    for line in problems:
        console.print(f"[red]FAIL[/red] {line}")
    console.print(f"wrote {', '.join(str(p) for p in paths)} in {meta['seconds']} s")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
