"""`make eval`: ctxproxy against a sliding window and passthrough on what the agent needed later.

Replays the real agent sessions, the agent-loop set and the planted-fact set (bench/eval_sets.py)
request by request: ctxproxy (the real engine and store, with `local/extractive` and with fake LLM
summarizers that fail or return garbage half the time, and more adversarial fakes on the planted
set) against the baselines. Prints the tables, writes bench/out/eval.json, regenerates the eval
section of docs/results.md, and exits 1 when the gate fails (`failures`).
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

from bench import charts, eval_gate, eval_tables, results_doc  # noqa: E402
from bench.eval_figures import result_row, set_row, versus_window  # noqa: E402
from bench.eval_sets import CTXPROXY, Job, SetName, SetSpec, conversations, jobs_for  # noqa: E402
from bench.fake_summarizers import ADVERSARIAL  # noqa: E402
from proxy.cli.replay import quiet_logs  # noqa: E402
from replay.needed_later.evaluate import StrategyResult, run_baseline, run_engine  # noqa: E402

OUT_DIR = Path("bench/out")
RESULTS_DOC = Path("docs/results.md")
TRIM_STRIDE = 4  # litellm's trim_messages is quadratic in the history: every 4th request
SETS: tuple[SetName, ...] = ("real", "loops", "planted")


def _measure(job: Job) -> StrategyResult:
    if job.strategy.startswith(CTXPROXY):
        fake = job.strategy.partition("+")[2]
        summarizer = ADVERSARIAL[fake]() if fake else None
        return asyncio.run(run_engine(job.conv, job.options, job.strategy, summarizer))
    options = replace(job.options, stride=TRIM_STRIDE) if job.strategy == "trim_messages" else job.options
    return run_baseline(job.conv, job.strategy, options)


def run_job(job: Job) -> tuple[SetName, StrategyResult, float]:
    """One (set, conversation, strategy) replay, measured, with its CPU seconds (a worker process)."""
    quiet_logs()
    started = time.process_time()
    result = _measure(job)
    return job.set_name, result, time.process_time() - started


def run_all(jobs: Sequence[Job], workers: int) -> list[tuple[SetName, StrategyResult, float]]:
    """Every job in parallel processes, the longest (engine runs on the longest sessions) first."""
    order = sorted(jobs, key=lambda j: (not j.strategy.startswith(CTXPROXY), -len(j.conv.messages)))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(run_job, order))


def cpu_by_set(runs: Sequence[tuple[SetName, StrategyResult, float]]) -> dict[str, float]:
    """CPU seconds spent per set (worker processes; imports included in each worker's first job)."""
    out: dict[str, float] = {}
    for set_name, _, cpu in runs:
        out[set_name] = round(out.get(set_name, 0.0) + cpu, 1)
    return out


def figures(results: Sequence[tuple[SetName, StrategyResult]]) -> dict[str, Any]:
    """Per-conversation rows, per-set rows, and ctxproxy-vs-window differences per conversation."""
    rows = [result_row(r, s) for s, r in results]
    by_key = {(s, r.conversation, r.strategy): r for s, r in results}
    groups: dict[tuple[str, str], list[StrategyResult]] = {}
    for s, r in results:
        groups.setdefault((s, r.strategy), []).append(r)
    versus = [{"set": s, "conversation": c, "strategy": name, **versus_window(r, window)}
              for (s, c, name), r in by_key.items()
              if name.startswith(CTXPROXY) and (window := by_key.get((s, c, "sliding_window")))]
    examples = {f"{s} {r.conversation} {r.strategy}": [asdict(e) for e in r.examples]
                for s, r in results if r.examples}
    return {"rows": rows, "sets": [set_row(rs, s) for (s, _), rs in groups.items()],
            "versus_window": versus, "loss_examples": examples}


def write_outputs(data: dict[str, Any], meta: dict[str, Any], out_dir: Path, docs: Path | None) -> list[Path]:
    """bench/out/eval.json, the retention chart, and (unless `docs` is None) the results doc."""
    out_dir.mkdir(parents=True, exist_ok=True)
    raw = out_dir / "eval.json"
    raw.write_text(json.dumps({"meta": meta, **data}, indent=1, ensure_ascii=False, default=str) + "\n",
                   encoding="utf-8")
    paths = [raw]
    if any(r["set"] == "real" for r in data["rows"]):
        paths.append(charts.retention_chart(data["rows"], out_dir / "eval_retention.png"))
        meta["chart"] = True
    if docs is not None:
        if meta.get("chart"):
            paths.append(_copy(out_dir / "eval_retention.png", docs.parent / "img" / "eval_retention.png"))
        paths.append(results_doc.update(docs, data, meta))
    return paths


def _copy(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return dst


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (sys.argv when `argv` is None)."""
    p = argparse.ArgumentParser(prog="python -m bench.eval", description=(__doc__ or "").splitlines()[0])
    p.add_argument("--sets", default=",".join(SETS), help="comma-separated subset of real,loops,planted")
    p.add_argument("--seed", type=int, default=SetSpec.seed)
    p.add_argument("--planted", type=int, default=SetSpec.planted_conversations,
                   help="planted-fact conversations")
    p.add_argument("--loop-tokens", type=int, default=SetSpec.loop_tokens, help="tokens per agent loop")
    p.add_argument("--workers", type=int, default=max(1, min(2, os.cpu_count() or 1)))
    p.add_argument("--out", type=Path, default=OUT_DIR)
    p.add_argument("--docs", type=str, default=str(RESULTS_DOC), help="results doc to update ('' = none)")
    return p.parse_args(argv)


def _sets(arg: str) -> list[SetName]:
    return [s for s in SETS if s in arg.split(",")]


def main(argv: Sequence[str] | None = None) -> int:
    """Run every set, print and write the figures; 1 when the gate fails."""
    args = parse_args(argv)
    started = time.monotonic()
    spec = SetSpec(seed=args.seed, planted_conversations=args.planted, loop_tokens=args.loop_tokens)
    convs = conversations(spec, _sets(args.sets))
    runs = run_all(jobs_for(spec, convs), args.workers)
    data = figures([(s, r) for s, r, _ in runs])
    problems = eval_gate.failures(data["rows"], real_missing="real" in convs and not convs["real"])
    meta = {"sets": {s: [c.id for c in cs] for s, cs in convs.items()}, "seed": spec.seed,
            "model": spec.model, "planted_window": spec.planted_window, "trim_stride": TRIM_STRIDE,
            "seconds": round(time.monotonic() - started, 1), "workers": args.workers,
            "cpu_seconds": cpu_by_set(runs),
            "gate": f"FAILED ({len(problems)} problems)" if problems else "passed", "problems": problems}
    console = Console(width=220)
    eval_tables.print_tables(console, data)
    paths = write_outputs(data, meta, args.out, Path(args.docs) if args.docs else None)
    for line in problems:
        console.print(f"[red]FAIL[/red] {line}")
    console.print(f"wrote {', '.join(str(p) for p in paths)} in {meta['seconds']} s")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
