"""A compaction step's loop: bring a working view down to a limit, oldest content first.

Each iteration picks the candidate chunks (a superseded tool output, elided to a pointer to its
newer copy, steps/superseded.py; an old oversized tool result, elided in place by just
what is needed; then a full run of condensable summaries, else the oldest raw chunk
before the fresh tail) and substitutes a prepared summary for one of them when
there is one (no summarizer call), else runs one pass (passes.py) on the first. It stops at the
limit, when no candidate is left, when a pass makes no progress, after `max_recovery_iterations`
passes, or once the request's deadline leaves no time even for local passes (compaction/deadline.py).
It pauses between passes, so other conversations' work on the engine's loop goes on meanwhile, and
a background step ends after the pass under way once a request of its conversation waits for it. Its
reach: `before_tail` keeps the fresh tail raw; `into_tail` (a request that does not fit otherwise)
lets it shrink to the newest group, after merging whatever old summaries it can. The last user
message is never summarized at either reach, nor a result a newer message refers back to (pinned,
within its share of the budget).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from compaction.steps import selection
from compaction.steps.passes import Candidate, PassContext, apply_summary, chunk_refs, run_pass
from compaction.steps.prepared import Fit, Prepared
from compaction.steps.superseded import refs_of, superseded_candidates, with_references_pinned
from compaction.types import Reach
from compaction.view.budget import Budget
from compaction.view.entry import last_user_index
from compaction.view.workview import WorkingView
from config.settings import CompactionSettings
from store.models import CompactionEvent

Skip = frozenset[tuple[str, ...]]
RESULT_ROLES = ("tool", "function")
MIN_ELISION_SAVING = 64  # an elision that frees less than this is not worth a step
LANDING_TOLERANCE_PERCENT = 5  # of the budget: a step lands within this of its target when it can
MIN_TRIMMED_TOKENS = 256  # a result trimmed to land a step keeps at least this (and a third of it)


def candidates(wv: WorkingView, s: CompactionSettings, budget: Budget, *, reach: Reach,
               skip: Skip = frozenset(), excess: int = 0) -> list[Candidate]:
    """Chunks worth compacting next, in order of preference (at most one of each kind).

    Chunks in `skip` (their entry refs) were tried and would not have shrunk the context; `excess`
    is how far over its limit the view is (an oversized result is elided by that much only).
    """
    out: list[Candidate] = []
    wv = with_references_pinned(wv, budget)  # referenced rounds stay raw (indices unchanged)
    end = (selection.fresh_tail_start(wv.entries, s.fresh_tail_count, tail_cap(wv, budget))
           if reach == "before_tail" else selection.newest_group_start(wv.entries))
    first = superseded_candidates(wv, end, selection.protected_indices(wv.entries))
    elide = oversized_result(wv, s, budget, reach, excess)
    for cand in first + ([elide] if elide else []) + list(_ordered(wv, s, budget, reach, bool(skip))):
        if chunk_refs(wv, cand.chunk) not in skip and all(c.kind != cand.kind or c.chunk != cand.chunk
                                                         for c in out):
            out.append(cand)
    return out


def _ordered(wv: WorkingView, s: CompactionSettings, budget: Budget, reach: Reach,
             skipped: bool) -> Iterator[Candidate]:
    entries = wv.entries
    last_user = last_user_index(entries)
    keep = frozenset({last_user} if last_user is not None else set())
    tail = selection.fresh_tail_start(entries, s.fresh_tail_count, tail_cap(wv, budget))
    cap = budget.leaf_chunk_tokens(s)
    full = selection.condensed_chunk(entries, s.condensed_min_fanout, s.leaf_chunk_tokens)
    fanout = s.leaf_min_fanout if reach == "before_tail" else 1
    yield from _leaves(selection.leaf_chunks(entries, tail, fanout, cap, keep=keep))
    if full:
        yield Candidate("condensed", full)
    if reach == "into_tail" or skipped:
        relaxed = selection.condensed_chunk(entries, 2, s.leaf_chunk_tokens)
        if relaxed:
            yield Candidate("condensed", relaxed)
    if reach == "into_tail":
        newest = selection.newest_group_start(entries)
        yield from _leaves(selection.leaf_chunks(entries, newest, 1, cap, keep=keep))


def landing_tolerance(budget: Budget) -> int:
    """How far from its target a step may land (whole chunks rarely land exactly at it)."""
    return budget.total * LANDING_TOLERANCE_PERCENT // 100


def tail_cap(wv: WorkingView, budget: Budget) -> int:
    """The fresh tail's token cap: its share of what the history may use, i.e. the budget less the
    tool schemas, the system prompt and the last user message (an agent's task can be half the
    window; a tail sized on the whole budget would leave nothing to compact)."""
    last_user = last_user_index(wv.entries)
    fixed = sum(m.token_count for m in wv.system)
    fixed += wv.entries[last_user].tokens if last_user is not None else 0
    room = max(0, budget.messages - fixed)
    return min(budget.fresh_tail_max, room * budget.fresh_tail_max_percent // 100)


def oversized_result(wv: WorkingView, s: CompactionSettings, budget: Budget, reach: Reach,
                     excess: int) -> Candidate | None:
    """The oldest tool result above the oversized limit before the tail (`before_tail`) or the
    newest group (`into_tail`), to elide in place by `excess` (never below half the limit): an old huge result
    gives way, precisely, before the messages around it."""
    entries = wv.entries
    protected = selection.protected_indices(entries)
    referenced = refs_of(wv).referenced  # kept raw; their round's other results may give way
    end = (selection.fresh_tail_start(entries, s.fresh_tail_count, tail_cap(wv, budget))
           if reach == "before_tail" else selection.newest_group_start(entries))
    floor = budget.oversized // 2
    for i, entry in enumerate(entries[:end]):
        if (entry.kind != "message" or entry.role not in RESULT_ROLES or i in protected
                or entry.tokens <= budget.oversized or entry.seq in referenced):
            continue
        allowance = max(floor, entry.tokens - max(excess, 0))
        if entry.tokens - allowance >= MIN_ELISION_SAVING:
            return Candidate("elide", (i,), allowance)
    return None


def _leaves(chunks: Iterator[tuple[int, ...]], limit: int = 4) -> Iterator[Candidate]:
    """The first few leaf chunks (a skipped chunk lets the next one be tried)."""
    for n, chunk in enumerate(chunks):
        if n >= limit:
            return
        yield Candidate("leaf", chunk)


@dataclass
class _Loop:
    """One compact-until loop's state: prepared summaries, chunks skipped, events, passes run."""

    ctx: PassContext
    prepared: Prepared
    reach: Reach
    summarize: bool = True  # False: prepared summaries and local elisions only, no summarizer call
    skip: set[tuple[str, ...]] = field(default_factory=set)
    events: list[CompactionEvent] = field(default_factory=list)
    passes: int = 0

    def next_move(self, wv: WorkingView, excess: int, room: int | None) -> Candidate | Fit | None:
        """A prepared substitution when one fits a candidate, else the first candidate; either one
        traded for trimming a big result when it would land far below the limit. With `room` (the
        view already fits its ceiling), a view within the landing tolerance above the limit takes
        no move that would land more than the tolerance below it: steps land near the limit."""
        s, budget = self.ctx.settings, self.ctx.budget
        options = candidates(wv, s, budget, reach=self.reach, skip=frozenset(self.skip), excess=excess)
        if self.ctx.trigger == "threshold":  # preparing ahead: summaries only, elisions are steps'
            options = [c for c in options if c.kind != "elide"]
            excess = 0
        if not options:
            return None
        if options[0].pointer:  # a superseded output gives way before anything is summarized
            return options[0]
        fit = self.prepared.first_fit(with_references_pinned(wv, budget), _substitutable(options))
        chunk = fit[0] if fit is not None else options[0].chunk
        saving = (sum(wv.entries[i].tokens for i in chunk) - fit[1].token_count if fit is not None
                  else _expected_saving(wv, options[0], s, budget))
        if fit is None and options[0].kind == "elide":
            return options[0]
        if fit is None and not self.summarize:
            return None
        trim = trim_instead(wv, chunk, saving, excess)
        if trim is not None:
            return trim
        tolerance = landing_tolerance(budget)
        near = room is not None and excess <= tolerance  # fits, and not far above the limit
        return None if near and saving - excess > tolerance else fit or options[0]

    async def apply(self, wv: WorkingView, move: Candidate | Fit, before: int) -> tuple[WorkingView, bool]:
        """The view after `move`, and whether the loop should stop (no progress)."""
        if not isinstance(move, Candidate):
            substituted = apply_summary(self.ctx, wv, move[0], move[1])
            if _shrinks(substituted, wv):
                return substituted, False
            self.prepared.discard(move[1].id)  # prepared, but it would not shrink this context
            return wv, False
        self.passes += 0 if move.pointer else 1  # pointer elisions are local and each ends one output
        new_wv, event = await run_pass(self.ctx, wv, move, before)
        self.events.append(event)
        if event.outcome == "skipped":  # the summary would not shrink the context: try another chunk
            self.skip.add(chunk_refs(wv, move.chunk))
            return wv, False
        if event.outcome != "committed" or not _shrinks(new_wv, wv):
            return wv, True
        return new_wv, False


async def compact_until(ctx: PassContext, wv: WorkingView, limit: int, *, reach: Reach,
                        ceiling: int | None = None,
                        summarize: bool = True) -> tuple[WorkingView, list[CompactionEvent]]:
    """Substitutions and passes until `ctx.measure(wv) <= limit` (see the module docstring); once
    the view fits `ceiling`, only moves that do not overshoot the limit much are taken. With
    `summarize` False it stops where a summarizer call would be needed (nothing prepared fits)."""
    loop = _Loop(ctx, Prepared.load(ctx.tenant, wv.conversation_id), reach, summarize)
    while loop.passes < max(1, ctx.settings.max_recovery_iterations):
        before = ctx.measure(wv)
        if before <= limit or ctx.deadline.exhausted:  # out of time: the request is truncated to fit
            break
        room = ceiling - before if ceiling is not None and before <= ceiling else None
        move = loop.next_move(wv, before - limit, room)
        if move is None:
            break
        wv, stop = await loop.apply(wv, move, before)
        if stop or ctx.interrupted():
            break
        await asyncio.sleep(0)  # one engine loop: other conversations' work runs between passes
    return wv, loop.events


def _expected_saving(wv: WorkingView, cand: Candidate, s: CompactionSettings, budget: Budget) -> int:
    """What compacting `cand` would free, about (a summary comes back near its target)."""
    tokens = sum(wv.entries[i].tokens for i in cand.chunk)
    if cand.kind == "elide":
        return tokens - cand.allowance
    return tokens - budget.summary_target(s, "leaf" if cand.kind == "leaf" else "condensed", tokens)


def trim_instead(wv: WorkingView, chunk: Sequence[int], saving: int, excess: int) -> Candidate | None:
    """Eliding the chunk's largest tool result by just `excess` (in place), when compacting the
    whole chunk would free more than twice what is needed: the step lands at its limit instead of
    far below it, and the rest of the chunk stays raw."""
    if excess <= 0 or saving <= 2 * excess:
        return None
    referenced = refs_of(wv).referenced  # a result referred back to is summarized whole or kept, not cut
    results = [i for i in chunk if wv.entries[i].kind == "message" and wv.entries[i].role in RESULT_ROLES
               and wv.entries[i].seq not in referenced]
    if not results:
        return None
    big = max(results, key=lambda i: wv.entries[i].tokens)
    cut = max(excess, MIN_ELISION_SAVING)
    allowance = wv.entries[big].tokens - cut
    if allowance < max(MIN_TRIMMED_TOKENS, wv.entries[big].tokens // 3):
        return None
    return Candidate("elide", (big,), allowance)


def _substitutable(options: list[Candidate]) -> list[Candidate]:
    """Candidates a prepared summary may stand for: not an elision, and not a chunk holding the
    oversized result an elision would shrink just enough (substituting it whole overshoots)."""
    elide = options[0].chunk[0] if options and options[0].kind == "elide" else None
    return [c for c in options if c.kind != "elide" and elide not in c.chunk]


def _shrinks(new: WorkingView, old: WorkingView) -> bool:
    """Progress is the view getting smaller; the anchor block growing with it is bounded by its
    share of the budget, so it may eat a step's first savings without stopping the step."""
    return sum(e.tokens for e in new.entries) < sum(e.tokens for e in old.entries)
