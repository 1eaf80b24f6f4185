"""The `make eval` gate: every reason the run exits 1, one line each.

A ctxproxy row (any set, any summarizer) fails when a request is over budget, tool pairing breaks,
an invented fact is forwarded, an error occurs, or placeholders reach PLACEHOLDER_LIMIT of the
forwarded tokens; on a real session, when it keeps less of what the agent needed later than the
sliding window (retention at k=1 or k=3); on the planted set, when a planted fact is missing from
the final context or a stale value reads as current.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.eval_sets import CTXPROXY
from replay.needed_later.scoring import LOOKAHEADS

Row = dict[str, Any]
PLACEHOLDER_LIMIT = 0.05


def _row_problems(row: Row) -> list[str]:
    """The guarantees every ctxproxy row must keep."""
    found = {"over budget": [str(row["over_budget"])] * bool(row["over_budget"]),
             "pairing violations": [str(row["pairing_violations"])] * bool(row["pairing_violations"]),
             "invented facts forwarded": row.get("invented_facts", []),
             "errors": row.get("errors", []),
             "missing planted facts": row.get("missing_facts", []) if row["set"] == "planted" else [],
             "stale as current": row.get("stale_as_current", []) if row["set"] == "planted" else []}
    if row["placeholder_share"] >= PLACEHOLDER_LIMIT:
        found["placeholders"] = [f"{100 * row['placeholder_share']:.1f}% of forwarded tokens"]
    return [f"{k}: {', '.join(v)}" for k, v in found.items() if v]


def _below_window(row: Row, window: Row) -> list[str]:
    """Retention below the sliding window's at any look-ahead."""
    out = []
    for k in LOOKAHEADS:
        mine, theirs = row[f"k{k}"], window[f"k{k}"]
        if mine is not None and theirs is not None and mine < theirs:
            out.append(f"retention k={k} {100 * mine:.1f}% < sliding window {100 * theirs:.1f}%")
    return out


def failures(rows: Sequence[Row], *, real_missing: bool = False) -> list[str]:
    """Every gate failure: `<strategy> <set>/<conversation>: <problem>` (per-conversation rows).

    `real_missing`: the real sessions were asked for and not found, which fails the gate too.
    """
    windows = {(r["set"], r["conversation"]): r for r in rows if r["strategy"] == "sliding_window"}
    out: list[str] = []
    for row in (r for r in rows if r["strategy"].startswith(CTXPROXY)):
        problems = _row_problems(row)
        window = windows.get((row["set"], row["conversation"]))
        if row["set"] == "real" and window is not None:
            problems += _below_window(row, window)
        out += [f"{row['strategy']} {row['set']}/{row['conversation']}: {p}" for p in problems]
    if real_missing:
        out.append("real sessions: none found (set CTXPROXY_REAL_TRAJECTORIES, or --sets loops,planted)")
    return out
