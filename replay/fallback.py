"""Which fallback level served each compaction pass, read from the compaction events of a replay.

Each committed compaction event is one pass. Its level, from the event's tier and level: `llm_normal`
and `llm_aggressive` (a summarizer other than the local ones wrote it), `extractive` (the local
extractive summarizer), `truncation` (a summary of head/tail excerpts), `forced_truncation` (the
plan cut or dropped to fit the budget), `elision` (runs dropped behind one pointer line). Anything
else is reported as `tier/level`, so a level the engine adds later still shows up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from store.models import CompactionEvent

LEVEL_ORDER = ("llm_normal", "llm_aggressive", "extractive", "truncation", "elision", "forced_truncation")
_SUMMARY_LEVELS = {"normal": "llm_normal", "aggressive": "llm_aggressive", "extractive": "extractive",
                   "truncation": "truncation", "elision": "elision"}


def pass_level(event: CompactionEvent) -> str:
    """The fallback level of one committed pass."""
    level, tier = str(event.level), str(event.tier)
    if "elision" in (level, tier):
        return "elision"
    if tier == "truncation":
        return "forced_truncation"
    if tier in ("leaf", "condensed") and level in _SUMMARY_LEVELS:
        return _SUMMARY_LEVELS[level]
    return f"{tier}/{level}"


def level_counts(events: Iterable[CompactionEvent]) -> dict[str, int]:
    """Committed passes by fallback level, in LEVEL_ORDER (levels with no pass left out)."""
    counts = Counter(pass_level(e) for e in events if e.outcome == "committed")
    ordered = [k for k in LEVEL_ORDER if k in counts] + sorted(set(counts) - set(LEVEL_ORDER))
    return {k: counts[k] for k in ordered}


def outcome_counts(events: Iterable[CompactionEvent]) -> dict[str, int]:
    """Every recorded pass by outcome (committed, rejected, failed, skipped), with the committed ones
    that came after a refused level (`rejected_facts` set) counted as `committed_after_rejection`."""
    return dict(Counter("committed_after_rejection" if e.outcome == "committed" and e.rejected_facts
                        else str(e.outcome) for e in events))


def shares(counts: Mapping[str, int]) -> dict[str, float]:
    """Each level's share of the passes (empty when there were none)."""
    total = sum(counts.values())
    return {k: v / total for k, v in counts.items()} if total else {}
