"""The eval's figures: one row per (set, conversation, strategy) and per (set, strategy), as dicts.

Definitions (docs/results.md repeats them):
- retention k=1 / k=3: mean over over-window requests (full history > budget) of needed identifiers
  kept / needed (replay/needed_later); `kept/needed` pools the counts;
- placeholders: placeholder tokens / forwarded tokens over the over-window requests
  (replay/needed_later/placeholders.py);
- unused budget: mean over over-window requests of (budget - forwarded) / budget;
- steps: committed compaction passes by fallback level (replay/fallback.py), read from the replay
  store's compaction events;
- planted needed later: planted facts present at the request whose reply uses them (generated sets).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from statistics import mean
from typing import Any

from replay.fallback import shares
from replay.needed_later.evaluate import StrategyResult
from replay.needed_later.scoring import LOOKAHEADS, RequestScore, paired, retention

Row = dict[str, Any]
BASELINE = "sliding_window"


def _over(scores: Sequence[RequestScore]) -> list[RequestScore]:
    return [s for s in scores if s.over_window]


def score_figures(scores: Sequence[RequestScore]) -> Row:
    """Retention per look-ahead, placeholder share and unused budget over over-window requests."""
    over = _over(scores)
    row: Row = {"requests": len(scores), "over_window": len(over)}
    for k in LOOKAHEADS:
        r = retention(scores, k)
        row[f"k{k}"], row[f"k{k}_kept"], row[f"k{k}_needed"] = r.mean, r.kept, r.needed
    forwarded = sum(s.forwarded_tokens for s in over)
    row["placeholder_share"] = sum(s.placeholder_tokens for s in over) / forwarded if forwarded else 0.0
    row["unused_share"] = mean(s.unused_share for s in over) if over else None
    return row


def _merge_counts(dicts: Sequence[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for counts in dicts:
        for key, value in counts.items():
            out[key] = out.get(key, 0) + value
    return out


def result_row(result: StrategyResult, set_name: str) -> Row:
    """One (set, conversation, strategy) row."""
    report = result.report
    planted = result.planted
    return {"set": set_name, "conversation": result.conversation, "strategy": result.strategy,
            **score_figures(result.scores),
            "over_budget": report.over_budget, "pairing_violations": report.pairing_violations,
            "invented": len(report.invented), "invented_facts": list(report.invented),
            "steps": dict(result.steps), "step_shares": shares(result.steps),
            "outcomes": dict(result.outcomes),
            "losses_vs_window": dict(result.losses), "gains_vs_window": dict(result.gains),
            "planted_kept": sum(p.kept for p in planted), "planted_total": len(planted),
            "planted_lost": [f"{p.kind}={p.fact}" for p in planted if not p.kept],
            "facts_retained": report.facts_retained if report.facts else None,
            "missing_facts": [f"{f.kind}={f.fact}" for f in report.facts if not f.present],
            "stale_as_current": [f"{f.kind}: {v}" for f in report.facts for v in f.stale_as_current],
            "errors": list(report.errors)}


def set_row(results: Sequence[StrategyResult], set_name: str) -> Row:
    """One strategy over a whole set: requests pooled, counts summed."""
    rows = [result_row(r, set_name) for r in results]
    scores = [s for r in results for s in r.scores]
    facts = [f for r in results for f in r.report.facts]
    steps = _merge_counts([r.steps for r in results])
    return {"set": set_name, "conversation": f"all ({len(results)})", "strategy": results[0].strategy,
            **score_figures(scores),
            **{k: sum(row[k] for row in rows) for k in ("over_budget", "pairing_violations", "invented",
                                                        "planted_kept", "planted_total")},
            "steps": steps, "step_shares": shares(steps),
            "outcomes": _merge_counts([r.outcomes for r in results]),
            "losses_vs_window": _merge_counts([r.losses for r in results]),
            "gains_vs_window": _merge_counts([r.gains for r in results]),
            "facts_retained": sum(f.present for f in facts) / len(facts) if facts else None}


def versus_window(result: StrategyResult, window: StrategyResult) -> Row:
    """Per-request ctxproxy - sliding window retention differences with 95% intervals."""
    return {f"k{k}": asdict(paired(result.scores, window.scores, k)) for k in LOOKAHEADS}
