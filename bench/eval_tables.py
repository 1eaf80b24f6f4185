"""The eval's tables, as plain (title, header, rows) shared by the console and docs/results.md."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable

from bench.eval_sets import CTXPROXY
from replay.fallback import LEVEL_ORDER

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Table:
    """One table: a title, its header and its rows of cells."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def pct(value: float | None, digits: int = 1) -> str:
    """A share as a percentage (`n/a` when unknown)."""
    return "n/a" if value is None else f"{100 * value:.{digits}f}%"


def _steps(row: Row) -> str:
    steps: Mapping[str, int] = row.get("steps") or {}
    return ", ".join(f"{k} {v}" for k, v in steps.items()) or "-"


def _versus(versus: Mapping[tuple[str, str, str], Row], row: Row, k: int) -> str:
    found = versus.get((row["set"], row["conversation"], row["strategy"]))
    if not found or found[f"k{k}"]["mean_diff"] is None:
        return ""
    p = found[f"k{k}"]
    low, high = p["ci95"]
    return f"{100 * p['mean_diff']:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"


def _guarantees(row: Row) -> tuple[str, ...]:
    return (pct(row["placeholder_share"], 2), pct(row["unused_share"]),
            f"{row['over_budget']}/{row['requests']}", str(row["pairing_violations"]), str(row["invented"]))


def real_table(data: Mapping[str, Any]) -> Table:
    """Per real session and strategy: retention, the paired difference with the window, guarantees."""
    versus = {(v["set"], v["conversation"], v["strategy"]): v for v in data["versus_window"]}
    rows = [(r["conversation"], r["strategy"], pct(r["k1"]), pct(r["k3"]), f"{r['k1_kept']}/{r['k1_needed']}",
             _versus(versus, r, 1), _versus(versus, r, 3), *_guarantees(r), _steps(r))
            for r in data["rows"] if r["set"] == "real"]
    return Table("Real agent sessions (window = 1/4 of each session)",
                 ("session", "strategy", "k=1", "k=3", "k=1 kept/needed", "k=1 vs window, pt [95% CI]",
                  "k=3 vs window", "placeholders", "unused budget", "over budget", "pairing viol.",
                  "invented fwd", "compaction steps (committed, by level)"), tuple(rows))


def levels_table(data: Mapping[str, Any]) -> Table:
    """Share of committed compaction steps per fallback level, per set and ctxproxy variant."""
    rows = []
    for r in (r for r in data["sets"] if r["strategy"].startswith(CTXPROXY)):
        shares: Mapping[str, float] = r["step_shares"]
        other = sum(v for k, v in shares.items() if k not in LEVEL_ORDER)
        outcomes: Mapping[str, int] = r["outcomes"]
        refused = ", ".join(f"{k} {v}" for k, v in outcomes.items() if k != "committed") or "-"
        rows.append((r["set"], r["strategy"], str(sum(r["steps"].values())),
                     *(pct(shares.get(level, 0.0)) for level in LEVEL_ORDER), pct(other), refused))
    return Table("Compaction steps by fallback level (share of committed steps)",
                 ("set", "strategy", "steps", *LEVEL_ORDER, "other", "steps with a refused level"),
                 tuple(rows))


def set_table(data: Mapping[str, Any], set_name: str, title: str) -> Table:
    """One generated set, every strategy pooled over its conversations."""
    rows = [(r["strategy"], pct(r["k1"]), pct(r["k3"]),
             f"{r['planted_kept']}/{r['planted_total']}" if r["planted_total"] else "-",
             pct(r["facts_retained"]) if r["facts_retained"] is not None else "-", *_guarantees(r))
            for r in data["sets"] if r["set"] == set_name]
    return Table(title, ("strategy", "k=1", "k=3", "planted, needed later", "planted, final context",
                         "placeholders", "unused budget", "over budget", "pairing viol.", "invented fwd"),
                 tuple(rows))


def losses_table(data: Mapping[str, Any]) -> Table:
    """Real sessions: why ctxproxy lost what the window kept, and where it kept what the window lost."""
    rows = []
    for r in (r for r in data["sets"] if r["set"] == "real" and r["strategy"].startswith(CTXPROXY)):
        lost: Mapping[str, int] = r["losses_vs_window"]
        kept: Mapping[str, int] = r["gains_vs_window"]
        rows.append((r["strategy"], str(sum(lost.values())), ", ".join(f"{k} {v}" for k, v in lost.items()),
                     str(sum(kept.values())), ", ".join(f"{k} {v}" for k, v in kept.items())))
    return Table("Real sessions, identifiers only one of ctxproxy and the window kept (k<=3, over-window)",
                 ("strategy", "window kept, ctxproxy lost", "by mechanism", "ctxproxy kept, window lost",
                  "carried by"), tuple(rows))


def all_tables(data: Mapping[str, Any]) -> list[Table]:
    """Every table of the run (empty ones left out)."""
    tables = [real_table(data), levels_table(data), losses_table(data),
              set_table(data, "loops", "Agent-loop set (generated: en, pt, zh, ja; window = 1/4)"),
              set_table(data, "planted", "Planted-fact set (generated; 12,000-token window)")]
    return [t for t in tables if t.rows]


def print_tables(console: Console, data: Mapping[str, Any]) -> None:
    """Every table, on the console."""
    for table in all_tables(data):
        rich = RichTable(title=table.title)
        for i, name in enumerate(table.header):
            rich.add_column(name, justify="left" if i < 2 else "right")
        for row in table.rows:
            rich.add_row(*row)
        console.print(rich)


def markdown(table: Table) -> list[str]:
    """One table as Markdown lines (title as a bold line above it)."""
    return [f"**{table.title}**", "", "| " + " | ".join(table.header) + " |",
            "|" + "|".join("---" if i < 2 else "---:" for i in range(len(table.header))) + "|",
            *("| " + " | ".join(row) + " |" for row in table.rows), ""]
