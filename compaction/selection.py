"""Which part of the working view a compaction pass summarises (seed 000 tiers, design table).

The working view is a list of `Entry`: stored summaries and raw messages in conversation order,
system/developer messages excluded (they are never summarised and the planner always emits them
first, in their original order). Entries sharing a `group` are an atomic tool round.

- fresh tail: the newest groups, up to `fresh_tail_count` messages and `fresh_tail_max` tokens,
  always including the last user message and everything after it; it never reaches past a summary.
- leaf chunk: the oldest contiguous run of raw messages before the tail with at least `min_fanout`
  messages or `chunk_tokens` tokens, capped near `chunk_tokens`; pinned groups are skipped (they
  stay raw, in place after the new summary).
- condensed chunk: the shallowest depth with `min_fanout` consecutive summaries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Entry:
    """One item of the working view with its cached token count."""

    kind: Literal["message", "summary"]
    ref: str  # message seq (decimal) or summary id
    tokens: int
    role: str  # message role; "summary" for summaries
    group: int  # atomic group key, unique per group across the view
    seq: int  # message seq; for summaries the last covered seq
    depth: int = -1  # summaries only
    pinned: bool = False
    message_id: int | None = None  # messages only


@dataclass(frozen=True)
class Span:
    """Entries `start..end-1` of one group."""

    start: int
    end: int


def spans(entries: Sequence[Entry]) -> list[Span]:
    """The groups of `entries`, in order."""
    out: list[Span] = []
    for i, entry in enumerate(entries):
        if out and entries[out[-1].start].group == entry.group:
            out[-1] = Span(out[-1].start, i + 1)
        else:
            out.append(Span(i, i + 1))
    return out


def _tokens(entries: Sequence[Entry], span: Span) -> int:
    return sum(e.tokens for e in entries[span.start:span.end])


def protected_start(entries: Sequence[Entry]) -> int:
    """Index where the last user turn starts (the last group when there is no user message)."""
    groups = spans(entries)
    for span in reversed(groups):
        if entries[span.start].role == "user":
            return span.start
    return groups[-1].start if groups else len(entries)


def fresh_tail_start(entries: Sequence[Entry], count: int, max_tokens: int) -> int:
    """Index of the first fresh-tail entry; everything from it on stays raw in normal passes."""
    start = protected_start(entries)
    messages = len(entries) - start
    tokens = sum(e.tokens for e in entries[start:])
    for span in reversed([s for s in spans(entries) if s.end <= start]):
        size, cost = span.end - span.start, _tokens(entries, span)
        if entries[span.start].kind == "summary" or messages + size > count or tokens + cost > max_tokens:
            break
        start, messages, tokens = span.start, messages + size, tokens + cost
    return start


def leaf_chunk(entries: Sequence[Entry], tail_start: int, min_fanout: int,
               chunk_tokens: int) -> tuple[int, ...] | None:
    """Indices of the oldest qualifying raw run before `tail_start`, or None."""
    run: list[Span] = []
    for span in spans(entries[:tail_start]):
        if entries[span.start].kind == "summary":
            chosen = _take_chunk(entries, run, min_fanout, chunk_tokens)
            if chosen:
                return chosen
            run = []
        elif not any(e.pinned for e in entries[span.start:span.end]):
            run.append(span)
    return _take_chunk(entries, run, min_fanout, chunk_tokens)


def _take_chunk(entries: Sequence[Entry], run: list[Span], min_fanout: int,
                chunk_tokens: int) -> tuple[int, ...] | None:
    picked: list[int] = []
    tokens = 0
    for span in run:
        cost = _tokens(entries, span)
        if picked and len(picked) >= min_fanout and tokens + cost > chunk_tokens:
            break
        picked.extend(range(span.start, span.end))
        tokens += cost
    if picked and (len(picked) >= max(min_fanout, 1) or tokens >= chunk_tokens):
        return tuple(picked)
    return None


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
