"""A compaction step's loop: bring a working view down to a limit, oldest content first.

Each iteration picks the candidate chunks (seed 000 tiers: a full run of condensable summaries, else
the oldest raw chunk before the fresh tail) and substitutes a prepared summary for one of them when
there is one (no summariser call), else runs one pass (passes.py) on the first. It stops at the
limit, when no candidate is left, when a pass makes no progress, or after `max_recovery_iterations`
passes. Modes: `normal` keeps the fresh tail raw; `hard` (a request that does not fit otherwise)
lets it shrink to the newest group, after merging whatever old summaries it can. The last user
message is never summarised in either mode.
"""

from __future__ import annotations

from collections.abc import Iterator

from compaction import selection
from compaction.budget import Budget
from compaction.passes import Candidate, PassContext, apply_summary, chunk_refs, run_pass
from compaction.prepared import Prepared
from compaction.types import PassMode
from compaction.workview import WorkingView
from config.settings import CompactionSettings
from store.models import CompactionEvent

Skip = frozenset[tuple[str, ...]]


def candidates(wv: WorkingView, s: CompactionSettings, budget: Budget, *, mode: PassMode,
               skip: Skip = frozenset()) -> list[Candidate]:
    """Chunks worth compacting next, in order of preference (at most one of each kind).

    Chunks in `skip` (their entry refs) were tried and would not have shrunk the context.
    """
    out: list[Candidate] = []
    for cand in _ordered(wv, s, budget, mode, bool(skip)):
        if chunk_refs(wv, cand.chunk) not in skip and all(c.tier != cand.tier or c.chunk != cand.chunk
                                                         for c in out):
            out.append(cand)
    return out


def _ordered(wv: WorkingView, s: CompactionSettings, budget: Budget, mode: PassMode,
             skipped: bool) -> Iterator[Candidate]:
    entries = wv.entries
    last_user = selection.last_user_index(entries)
    keep = frozenset({last_user} if last_user is not None else set())
    tail = selection.fresh_tail_start(entries, s.fresh_tail_count, budget.fresh_tail_max)
    cap = budget.leaf_chunk_tokens(s)
    full = selection.condensed_chunk(entries, s.condensed_min_fanout, s.leaf_chunk_tokens)
    if full:
        yield Candidate("condensed", full)
    fanout = s.leaf_min_fanout if mode == "normal" else 1
    yield from _leaves(selection.leaf_chunks(entries, tail, fanout, cap, keep=keep))
    if mode == "hard" or skipped:
        relaxed = selection.condensed_chunk(entries, 2, s.leaf_chunk_tokens)
        if relaxed:
            yield Candidate("condensed", relaxed)
    if mode == "hard":
        newest = selection.newest_group_start(entries)
        yield from _leaves(selection.leaf_chunks(entries, newest, 1, cap, keep=keep))


def _leaves(chunks: Iterator[tuple[int, ...]], limit: int = 4) -> Iterator[Candidate]:
    """The first few leaf chunks (a skipped chunk lets the next one be tried)."""
    for n, chunk in enumerate(chunks):
        if n >= limit:
            return
        yield Candidate("leaf", chunk)


async def compact_until(ctx: PassContext, wv: WorkingView, limit: int, *,
                        mode: PassMode) -> tuple[WorkingView, list[CompactionEvent]]:
    """Substitutions and passes until `ctx.measure(wv) <= limit` (see the module docstring)."""
    prepared = Prepared.load(ctx.tenant, wv.conversation_id)
    events: list[CompactionEvent] = []
    skip: set[tuple[str, ...]] = set()
    passes = 0
    while passes < max(1, ctx.settings.max_recovery_iterations):
        before = ctx.measure(wv)
        if before <= limit:
            break
        options = candidates(wv, ctx.settings, ctx.budget, mode=mode, skip=frozenset(skip))
        if not options:
            break
        fit = prepared.first_fit(wv, options)
        if fit is not None:
            substituted = apply_summary(ctx, wv, fit[0], fit[1])
            if _shrinks(substituted, wv):
                wv = substituted
            else:
                prepared.discard(fit[1].id)  # prepared, but it would not shrink this context
            continue
        passes += 1
        new_wv, event = await run_pass(ctx, wv, options[0], before)
        events.append(event)
        if event.outcome == "skipped":  # the summary would not shrink the context: try another chunk
            skip.add(chunk_refs(wv, options[0].chunk))
            continue
        if event.outcome != "committed" or not _shrinks(new_wv, wv):
            break
        wv = new_wv
    return wv, events


def _shrinks(new: WorkingView, old: WorkingView) -> bool:
    """Progress is the view getting smaller; the anchor block growing with it is bounded by its
    share of the budget, so it may eat a step's first savings without stopping the step."""
    return sum(e.tokens for e in new.entries) < sum(e.tokens for e in old.entries)
