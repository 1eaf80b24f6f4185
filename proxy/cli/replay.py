"""`ctxproxy replay FILE`: replay recorded conversations through the real engine, offline.

`ctxproxy replay FILE [--model gpt-4o-mini] [--window 12000] [--summarizer local/extractive|MODEL]
[--config FILE] [--json] [--chart out.png] [--limit N] [--async]`. FILE is JSONL in one of these
formats, told apart by its first line: one conversation a line, `{"id", "messages", "tools"?,
"checks"?}` (replay/records.py; the eval's generators write such files) or OpenAI's fine-tuning
`{"messages", "tools"?}` (each line's id is `line-N`), or one real agent session,
`{"meta"}` then `{"tools"}` then one message a line (replay/trajectory.py), or a request log: one
body of /v1/chat/completions, /v1/responses or /v1/messages a line (proxy/cli/replay_bodies.py,
a body extending an earlier one continues its conversation). A malformed line is
reported with its line number. Each request is planned by the real Engine over a throw-away
store (replay/run.py); nothing is sent to any provider unless --summarizer names a real model.
This module is presentation only: arguments, progress bar, rich tables, JSON, chart.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import structlog
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from config.errors import CtxProxyError
from config.loader import load_settings
from config.settings import LOCAL_EXTRACTIVE, CompactionSettings, Settings

if TYPE_CHECKING:  # the engine is imported only when a replay runs (`ctxproxy --help` stays light)
    from replay.records import RecordedConversation
    from replay.report import ConversationReport
    from replay.run import ReplayOptions

HELP = "replay recorded conversations (JSONL) through the real engine and report what it forwards"
DEFAULT_WINDOW = 12_000
EXIT_ERROR = 2


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `replay` on the main CLI's subparsers (sets `func`)."""
    parser: argparse.ArgumentParser = subparsers.add_parser("replay", help=HELP, description=HELP)
    configure_parser(parser)
    return parser


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", type=Path,
                        help="JSONL: one conversation a line (fine-tuning {messages} lines too), one session "
                             "(meta, tools, messages), or one request body a line")
    parser.add_argument("--model", default="gpt-4o-mini", help="tokenizer, price and model settings")
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW,
                        help=f"context window to simulate (default {DEFAULT_WINDOW}; 0 = the model's own)")
    parser.add_argument("--summarizer", default=LOCAL_EXTRACTIVE,
                        help="local/extractive (default), a model_list name or any litellm model")
    parser.add_argument("--config", metavar="FILE", help="YAML config (models, compaction, summarizer)")
    parser.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")
    parser.add_argument("--chart", metavar="PNG", type=Path, help="write a per-request chart")
    parser.add_argument("--limit", type=int, metavar="N", help="replay only the first N conversations")
    parser.add_argument("--async", dest="background", action="store_true",
                        help="do not wait for background compaction between turns (as a live proxy)")
    parser.set_defaults(func=run)


def quiet_logs() -> None:
    """Engine logs go to stderr, errors only: replay output (tables, --json) stays clean."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR),
                        logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    # litellm's trim_messages logs a traceback each time it fails on a content-less tool_calls
    # message (and then returns the history untrimmed); the checks measure that, the log is noise.
    for name in ("LiteLLM", "litellm"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _options(args: argparse.Namespace, settings: Settings) -> ReplayOptions:
    from compaction import resolve_context_window
    from replay.run import ReplayOptions

    entry = settings.find_model(args.model)
    overridden = entry is not None and entry.compaction != CompactionSettings()
    compaction = entry.compaction if entry is not None and overridden else settings.compaction
    window = args.window or resolve_context_window(settings, args.model)[0]
    return ReplayOptions(model=args.model, window=window, summarizer=args.summarizer,
                         background=args.background, compaction=compaction)


async def _replay(convs: Sequence[RecordedConversation], options: ReplayOptions, settings: Settings,
                  progress: Progress) -> list[ConversationReport]:
    from replay.run import replay_engine

    reports = []
    for conv in convs:
        task = progress.add_task(conv.id, total=None)

        def hook(done: int, total: int, task: Any = task) -> None:
            progress.update(task, completed=done, total=total)

        reports.append(await replay_engine(conv, options, settings=settings, progress=hook))
    return reports


def table_for(report: ConversationReport) -> Table:
    """The per-conversation figures as a two-column table."""
    s = report.summary()
    table = Table(title=f"{report.conversation_id}: {len(report.requests)} requests")
    table.add_column("figure")
    table.add_column("value", justify="right")
    facts = f"{sum(f.present for f in report.facts)}/{len(report.facts)}" if report.facts else "no checks"
    last = report.requests[-1] if report.requests else None
    rows = [("tokens received (last request)", f"{last.tokens_received:,}" if last else "n/a"),
            ("tokens forwarded (last request)", f"{last.tokens_forwarded:,}" if last else "n/a"),
            ("budget", f"{last.budget:,}" if last else "n/a"),
            ("requests refused (errors)", str(len(report.errors))),
            ("compression (all requests)", f"{s['compression_ratio']:.2f}x"),
            ("requests over budget", str(s["over_budget"])),
            ("tool-pairing violations", str(s["pairing_violations"])),
            ("prefix stability", _pct(s["prefix_stability"])),
            ("requests that compacted", str(sum(t.compacted for t in report.turns))),
            ("waited on summarizer", str(sum(t.waited_on_summarizer for t in report.turns))),
            ("summarizer calls (per request)", f"{s['summarizer_calls']} ({s['calls_per_turn']:.2f})"),
            ("verification rejections", str(sum(t.rejections for t in report.turns))),
            ("anchors (end)", str(report.turns[-1].anchors if report.turns else 0)),
            ("facts in final context", facts), ("corrections current", _pct(s["corrections_current"])),
            ("invented facts forwarded", str(s["invented"])),
            ("est. cost forwarded / passthrough", _cost(s["cost_usd"], s["cost_passthrough_usd"]))]
    for name, value in rows:
        table.add_row(name, value)
    return table


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def _cost(cost: float | None, full: float | None) -> str:
    return "n/a" if cost is None or full is None else f"${cost:.4f} / ${full:.4f}"


def run(args: argparse.Namespace, env: Mapping[str, str] | None = None, out: TextIO | None = None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from proxy.cli.replay_bodies import read_any
    from replay.chart import require_charts

    out = out or sys.stdout
    try:
        if args.chart:  # fail before a long replay, not after it
            require_charts()
        settings = load_settings(args.config, os.environ if env is None else env)
        convs = read_any(args.file)[: args.limit]
    except (CtxProxyError, OSError, UnicodeDecodeError) as exc:
        print(f"ctxproxy replay: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return EXIT_ERROR
    quiet_logs()
    options = _options(args, settings)
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=Console(stderr=True), transient=True)
    try:
        with progress:
            reports = asyncio.run(_replay(convs, options, settings, progress))
    except CtxProxyError as exc:
        print(f"ctxproxy replay: {exc.message}", file=sys.stderr)
        return EXIT_ERROR
    return _emit(args, reports, options, out)


def _emit(args: argparse.Namespace, reports: Sequence[ConversationReport], options: ReplayOptions,
          out: TextIO) -> int:
    if args.chart:
        from replay.chart import turn_chart

        turn_chart(reports, args.chart)
    if args.json:
        meta = {k: v for k, v in dataclasses.asdict(options).items() if k != "compaction"}
        json.dump({"options": meta, "conversations": [r.to_dict() for r in reports]}, out, indent=2,
                  ensure_ascii=False)
        out.write("\n")
        return 0
    console = Console(file=out, width=120)
    for report in reports:
        console.print(table_for(report))
        for error in report.errors[:5]:
            console.print(f"refused: {error}", markup=False)
    if args.chart:
        console.print(f"chart: {args.chart}")
    return 0
