"""Scores: the share of needed identifiers a forwarded request keeps, per request and per session.

kept(t, k) = identifiers needed at request point t within look-ahead k (needed.py) that occur
word-bounded in the forwarded context: message contents, tool-call arguments, summaries and the
anchor block alike. Session figures are taken over the over-window requests (the full history does
not fit the budget: the only requests where strategies differ) that need at least one identifier:
the mean of per-request ratios (retention) and the pooled kept / needed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import mean

from replay.needed_later.needed import RequestNeeds
from replay.needed_later.texts import TextIndex

LOOKAHEADS = (1, 3)  # the look-aheads reported: the next reply, and the next three


@dataclass(frozen=True)
class RequestScore:
    """One forwarded request of one strategy: needed and kept counts per look-ahead, and tokens."""

    point: int
    history_tokens: int  # the whole history with the client's tools, as passthrough sends it
    budget: int
    forwarded_tokens: int  # what the strategy sent, tool schemas included
    needed: tuple[int, ...]  # per LOOKAHEADS entry
    kept: tuple[int, ...]  # per LOOKAHEADS entry
    missing: frozenset[str]  # needed identifiers (largest look-ahead) the request lost
    placeholder_tokens: int = 0

    @property
    def over_window(self) -> bool:
        """The full history does not fit the budget."""
        return self.history_tokens > self.budget

    @property
    def unused_share(self) -> float:
        """Share of the budget left unused (0 when over budget)."""
        return max(0, self.budget - self.forwarded_tokens) / self.budget if self.budget else 0.0


def score_request(needs: RequestNeeds, forwarded: TextIndex, *, history_tokens: int, budget: int,
                  forwarded_tokens: int, placeholder_tokens: int = 0) -> RequestScore:
    """Count the needed identifiers the forwarded text keeps, for every look-ahead of LOOKAHEADS."""
    every = needs.select(max(LOOKAHEADS))
    present = {i.ident for i in every if forwarded.has(i.ident)}
    needed = tuple(len(needs.select(k)) for k in LOOKAHEADS)
    kept = tuple(sum(i.ident in present for i in needs.select(k)) for k in LOOKAHEADS)
    return RequestScore(needs.point, history_tokens, budget, forwarded_tokens, needed, kept,
                        frozenset(i.ident for i in every) - present, placeholder_tokens)


@dataclass(frozen=True)
class Retention:
    """A strategy's retention at one look-ahead over a conversation's over-window requests."""

    mean: float | None  # mean of per-request kept / needed (requests needing nothing skipped)
    kept: int
    needed: int
    requests: int  # over-window requests that needed at least one identifier

    @property
    def pooled(self) -> float | None:
        """Total kept / total needed."""
        return self.kept / self.needed if self.needed else None


def retention(scores: Sequence[RequestScore], k: int) -> Retention:
    """Aggregate `scores` at look-ahead `k` (one of LOOKAHEADS) over over-window requests."""
    at = LOOKAHEADS.index(k)
    rows = [s for s in scores if s.over_window and s.needed[at] > 0]
    ratios = [s.kept[at] / s.needed[at] for s in rows]
    return Retention(mean(ratios) if ratios else None, sum(s.kept[at] for s in rows),
                     sum(s.needed[at] for s in rows), len(rows))


@dataclass(frozen=True)
class Paired:
    """Per-request comparison of strategy a with b on the same over-window requests."""

    mean_diff: float | None  # mean of (a - b) per-request retention
    ci95: tuple[float, float] | None  # bootstrap percentile interval of that mean
    a_better: int
    b_better: int
    ties: int


def paired(a: Sequence[RequestScore], b: Sequence[RequestScore], k: int, *, resamples: int = 2_000,
           seed: int = 0) -> Paired:
    """Mean per-request retention difference a - b at look-ahead k, its 95% interval, wins and ties."""
    at = LOOKAHEADS.index(k)
    by_point = {s.point: s for s in b}
    diffs = [(s.kept[at] - by_point[s.point].kept[at]) / s.needed[at] for s in a
             if s.over_window and s.needed[at] > 0 and s.point in by_point]
    if not diffs:
        return Paired(None, None, 0, 0, 0)
    rng = random.Random(seed)
    means = sorted(mean(rng.choices(diffs, k=len(diffs))) for _ in range(resamples))
    interval = (means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1])
    return Paired(mean(diffs), interval, sum(d > 0 for d in diffs), sum(d < 0 for d in diffs),
                  sum(d == 0 for d in diffs))
