"""What a step does with back-references (compaction/view/backrefs.py) before summarizing anything.

- Referenced results (a newer "unchanged since your last Read" points at them) are pinned in the
  step's copy of the view, with their tool round: chunk selection and prepared summaries skip the
  round and no elision picks the referenced results, so they stay raw in place (the round's other
  results may still be elided in place). Bounded: the newest referenced rounds first, at most
  `REFERENCED_SHARE_PERCENT` of what the history may use; older ones beyond it compact as usual.
- Superseded outputs (the same call made again later, e.g. the file read again, the test re-run)
  before the fresh tail are the first thing a step gives up: each is elided in place to one pointer
  naming the newer copy (identical or not). The elision is a stored summary of that one message;
  the original stays lossless in the store and its tool pairing is intact. This compacts tool
  output the agent has replaced before any of the agent's own messages. An earlier copy is what
  gives way (not the newer one): the newer copy is the one the agent reads now, and a step
  rewrites from its first change anyway, while the requests between steps only append.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from compaction.steps.passes import Candidate
from compaction.view.backrefs import BackRefs, analyze_stored
from compaction.view.budget import Budget
from compaction.view.entry import Entry
from compaction.view.workview import WorkingView

REFERENCED_SHARE_PERCENT = 35  # of the message budget: the most pinned referenced rounds may take
RESULT_ROLES = ("tool", "function")
POINTER_MIN_SAVING = 48  # a superseded output shorter than its pointer plus this stays
_CACHE: dict[tuple[str, int, int, int], BackRefs] = {}
_CACHE_SIZE = 64


def refs_of(wv: WorkingView) -> BackRefs:
    """The view's back-references (memoised by conversation and last seq: a step asks often)."""
    last = wv.stored.get(wv.last_seq)
    key = (wv.conversation_id, wv.last_seq, len(wv.stored), last.id if last is not None else -1)
    found = _CACHE.get(key)
    if found is None:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        found = _CACHE[key] = analyze_stored(list(wv.stored.values()))
    return found


def pinned_groups(entries: Sequence[Entry], refs: BackRefs, cap: int) -> frozenset[int]:
    """Groups of raw referenced results to keep raw, newest first, within `cap` tokens: a group
    costs its referenced results and its other messages but not its other tool results (those may
    still be elided in place, oversized or superseded, while the round stays)."""
    tokens: dict[int, int] = {}
    for e in entries:
        if e.seq in refs.referenced or e.role not in RESULT_ROLES:
            tokens[e.group] = tokens.get(e.group, 0) + e.tokens
    out: set[int] = set()
    used = 0
    for e in reversed(entries):
        if e.kind != "message" or e.elided or e.seq not in refs.referenced or e.group in out:
            continue
        if used + tokens[e.group] <= cap:
            out.add(e.group)
            used += tokens[e.group]
    return frozenset(out)


def with_references_pinned(wv: WorkingView, budget: Budget) -> WorkingView:
    """`wv` with the referenced rounds pinned (the step's copy only: nothing is stored)."""
    refs = refs_of(wv)
    if not refs.referenced:
        return wv
    groups = pinned_groups(wv.entries, refs, budget.messages * REFERENCED_SHARE_PERCENT // 100)
    if not groups:
        return wv
    entries = tuple(replace(e, pinned=True) if e.group in groups and not e.pinned else e for e in wv.entries)
    return replace(wv, entries=entries)


def pointer_text(refs: BackRefs, wv: WorkingView, entry: Entry) -> str:
    """The note a superseded output is elided to."""
    newer_seq = refs.superseded[entry.seq]
    newer = wv.stored.get(newer_seq)
    own = wv.stored[entry.seq]
    where = f"message {newer.id}" if newer is not None else "a later message"
    same = "identical output" if entry.seq in refs.identical else "newer output"
    call = refs.calls.get(entry.seq, "the same call")
    return (f"[ctxproxy: superseded output of {call} ({own.token_count} tokens) elided; the {same} "
            f"of the same call is {where}; this one is kept in the store as message {own.id}]")


def superseded_candidates(wv: WorkingView, end: int, protected: frozenset[int]) -> list[Candidate]:
    """Elisions of superseded outputs before `end`, oldest first (pinned and protected ones stay)."""
    refs = refs_of(wv)
    if not refs.superseded:
        return []
    out: list[Candidate] = []
    for i, entry in enumerate(wv.entries[:end]):
        if (entry.kind != "message" or entry.role not in RESULT_ROLES or entry.elided or entry.pinned
                or i in protected or entry.seq not in refs.superseded or entry.seq in refs.referenced):
            continue
        text = pointer_text(refs, wv, entry)
        allowance = len(text) // 3 + 8  # about the pointer's tokens, with the message overhead
        if entry.tokens - allowance >= POINTER_MIN_SAVING:
            out.append(Candidate("elide", (i,), allowance, text))
    return out
