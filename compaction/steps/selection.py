"""Which part of the working view a compaction pass summarizes: a leaf chunk or a condensed chunk.

The working view is a list of `Entry`: stored summaries and raw messages in conversation order,
system/developer messages excluded (they are never summarized and the planner always emits them
first, in their original order). Entries sharing a `group` are an atomic tool round.

- protected: the last user message (wherever it sits: in an agent loop it is the task, far back)
  and the newest group stay raw at every reach; the last user message ends a leaf run, in place.
- fresh tail: the newest whole groups, up to `fresh_tail_count` messages and `fresh_tail_max`
  tokens (the newest group always, even alone over the cap); it never reaches past a summary. It is
  not "everything since the last user message": agent loops have one user message and hundreds of
  tool rounds after it.
- leaf chunk: the oldest contiguous run of raw messages before the tail, capped at `chunk_tokens`,
  with at least `min_fanout` messages unless the cap cut it; pinned groups are skipped (they stay
  raw, in place after the new summary).
- condensed chunk: the shallowest depth with `min_fanout` consecutive summaries.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from compaction.view.entry import Entry, last_user_index


@dataclass(frozen=True)
class Span:
    """Entries `start..end-1` of one group."""

    start: int
    end: int


def spans(entries: Sequence[Entry]) -> list[Span]:
    """The groups of `entries`, in order."""
    return list(spans_from_start(entries, len(entries)))


def spans_from_start(entries: Sequence[Entry], end: int) -> Iterator[Span]:
    """The groups of `entries[:end]`, oldest first, found lazily (no copy of the entries)."""
    start = 0
    while start < end:
        group, stop = entries[start].group, start + 1
        while stop < end and entries[stop].group == group:
            stop += 1
        yield Span(start, stop)
        start = stop


def spans_from_end(entries: Sequence[Entry]) -> Iterator[Span]:
    """The groups of `entries`, newest first, found lazily: a caller looking at the last few groups
    of a long history (the fresh tail, the newest group) does not walk all of it."""
    end = len(entries)
    while end > 0:
        group, start = entries[end - 1].group, end - 1
        while start > 0 and entries[start - 1].group == group:
            start -= 1
        yield Span(start, end)
        end = start


def _tokens(entries: Sequence[Entry], span: Span) -> int:
    return sum(e.tokens for e in entries[span.start:span.end])


def newest_group_start(entries: Sequence[Entry]) -> int:
    """Index where the newest group starts (len(entries) when there is none)."""
    newest = next(spans_from_end(entries), None)
    return newest.start if newest is not None else len(entries)


def protected_indices(entries: Sequence[Entry]) -> frozenset[int]:
    """Entries no pass may summarize: the last user message and the newest group."""
    last_user = last_user_index(entries)
    newest = set(range(newest_group_start(entries), len(entries)))
    return frozenset(newest | ({last_user} if last_user is not None else set()))


def fresh_tail_start(entries: Sequence[Entry], count: int, max_tokens: int) -> int:
    """Index of the first fresh-tail entry: the newest whole groups within `count` messages and
    `max_tokens` tokens (the newest group always); normal passes summarize only before it."""
    groups = spans_from_end(entries)
    newest = next(groups, None)
    if newest is None:
        return len(entries)
    start = newest.start
    messages, tokens = len(entries) - start, _tokens(entries, newest)
    for span in groups:
        size, cost = span.end - span.start, _tokens(entries, span)
        if entries[span.start].kind == "summary" or messages + size > count or tokens + cost > max_tokens:
            break
        start, messages, tokens = span.start, messages + size, tokens + cost
    return start


def leaf_chunk(entries: Sequence[Entry], tail_start: int, min_fanout: int, chunk_tokens: int,
               *, keep: frozenset[int] = frozenset()) -> tuple[int, ...] | None:
    """Indices of the oldest qualifying raw chunk before `tail_start`, or None."""
    return next(leaf_chunks(entries, tail_start, min_fanout, chunk_tokens, keep=keep), None)


def leaf_chunks(entries: Sequence[Entry], tail_start: int, min_fanout: int, chunk_tokens: int,
                *, keep: frozenset[int] = frozenset()) -> Iterator[tuple[int, ...]]:
    """Qualifying raw chunks before `tail_start`, oldest first (a caller skipping one gets the next).

    A summary or a `keep` entry (the last user message) ends a run; pinned groups are skipped.
    """
    run: list[Span] = []
    pending = 0  # tokens of `run`
    for span in spans_from_start(entries, tail_start):
        if entries[span.start].kind == "summary" or keep.intersection(range(span.start, span.end)):
            yield from _chunks_of(entries, run, min_fanout, chunk_tokens)
            run, pending = [], 0
        elif not any(e.pinned for e in entries[span.start:span.end]):
            run.append(span)
            pending += _tokens(entries, span)
            # Over the cap, the leading chunk is settled (no later group changes it): yield it now,
            # so a caller wanting the oldest few chunks of a long history does not walk all of it.
            while pending > chunk_tokens:
                chunk, used = _take_chunk(entries, run, min_fanout, chunk_tokens)
                if chunk is None:  # cannot happen over the cap; kept so a change here stays safe
                    break
                yield chunk
                pending -= sum(_tokens(entries, s) for s in run[:used])
                run = run[used:]
    yield from _chunks_of(entries, run, min_fanout, chunk_tokens)


def _chunks_of(entries: Sequence[Entry], run: list[Span], min_fanout: int,
               chunk_tokens: int) -> Iterator[tuple[int, ...]]:
    while run:
        chunk, used = _take_chunk(entries, run, min_fanout, chunk_tokens)
        if chunk is None:
            return
        yield chunk
        run = run[used:]


def _take_chunk(entries: Sequence[Entry], run: list[Span], min_fanout: int,
                chunk_tokens: int) -> tuple[tuple[int, ...] | None, int]:
    """The run's leading groups up to `chunk_tokens` (at least half of it, or one group), and how
    many groups that is; it qualifies with `min_fanout` messages, `chunk_tokens` tokens, or when the
    cap cut the run short."""
    picked: list[int] = []
    tokens = used = 0
    capped = False
    for span in run:
        cost = _tokens(entries, span)
        if picked and tokens + cost > chunk_tokens and tokens * 2 >= chunk_tokens:
            capped = True
            break
        picked.extend(range(span.start, span.end))
        tokens += cost
        used += 1
    if picked and (capped or len(picked) >= max(min_fanout, 1) or tokens >= chunk_tokens):
        return tuple(picked), used
    return None, used


def condensed_chunk(entries: Sequence[Entry], min_fanout: int,
                    max_tokens: int) -> tuple[int, ...] | None:
    """Indices of the first run of >= `min_fanout` consecutive summaries at the shallowest depth."""
    depths = sorted({e.depth for e in entries if e.kind == "summary"})
    for depth in depths:
        run: list[int] = []
        for i, entry in enumerate([*entries, None]):
            if entry is not None and entry.kind == "summary" and entry.depth == depth:
                run.append(i)
                continue
            if len(run) >= min_fanout:
                return _cap_run(entries, run, min_fanout, max_tokens)
            run = []
    return None


def _cap_run(entries: Sequence[Entry], run: list[int], min_fanout: int,
             max_tokens: int) -> tuple[int, ...]:
    picked: list[int] = []
    tokens = 0
    for i in run:
        if len(picked) >= min_fanout and tokens + entries[i].tokens > max_tokens:
            break
        picked.append(i)
        tokens += entries[i].tokens
    return tuple(picked)


def replace(entries: Sequence[Entry], chunk: Sequence[int], summary: Entry) -> list[Entry]:
    """`entries` with the `chunk` entries replaced by `summary`, at the chunk's first position."""
    drop = set(chunk)
    out: list[Entry] = []
    for i, entry in enumerate(entries):
        if i == chunk[0]:
            out.append(summary)
        if i not in drop:
            out.append(entry)
    return out
