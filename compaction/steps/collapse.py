"""Collapse: a history far larger than the window (an imported session) brought down in one local move.

Summarizing a history pass by pass costs time in proportion to its length: an agent resuming a
50,000-message session would wait minutes, each following turn stepping again. When a request is
half again over its budget and 100k tokens above its target, its oldest raw run (all but the newest
half budget of history) becomes ONE summary at the truncation level: its first messages kept whole
within a leaf summary's size, the rest named in one pointer line. No summarizer, no anchor
extraction: a linear pass over the run's ids. The store keeps every message (search and expand
bring them back); the newest half budget of history is then compacted as usual, within the
request's deadline, and the view saved, so the next turns only append.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from compaction.offload import OFF_LOOP_MIN_CHARS, off_loop
from compaction.steps import selection
from compaction.steps.passes import PassContext, apply_summary, record_event
from compaction.summarize.escalation import LOCAL_TRUNCATION
from compaction.summarize.prompts import build_source_text
from compaction.summarize.redact import redact
from compaction.summarize.source_blocks import blocks, pointer_line
from compaction.view.entry import Entry
from compaction.view.workview import WorkingView
from store.models import Anchor, CompactionEvent, ContextView, StoredMessage, SummaryDraft, SummaryRecord

COLLAPSE_ABOVE_PERCENT = 150  # of the budget: a request this far over it collapses first...
COLLAPSE_MIN_EXCESS_TOKENS = 100_000  # ...and this far over its target (5+ full leaf chunks of passes)
KEEP_PERCENT = 50  # of the message budget: the newest history left to the usual passes
HEAD_MESSAGES = 64  # the run's first messages considered for keeping whole (the rest only named)


async def collapse_far_over(ctx: PassContext, wv: WorkingView,
                            before: int) -> tuple[WorkingView, list[CompactionEvent]]:
    """When the request (`before` tokens) is far over the budget, by more than a request's passes
    take down, its oldest raw run collapsed so that about half a message budget of history remains
    for the usual passes."""
    far = before * 100 > COLLAPSE_ABOVE_PERCENT * ctx.budget.total
    if not far or before - ctx.budget.target <= COLLAPSE_MIN_EXCESS_TOKENS:
        return wv, []
    chunk = collapse_run(wv.entries, ctx.budget.messages * KEEP_PERCENT // 100)
    if not chunk:
        return wv, []
    try:
        new_wv, event = await collapse_pass(ctx, wv, chunk, before)
    except Exception as exc:  # recorded like a failed pass; the usual passes and truncation go on
        failed = CompactionEvent(wv.conversation_id, ctx.trigger, "leaf", "truncation", "failed",
                                 LOCAL_TRUNCATION, tokens_before=before, tokens_after=before,
                                 error=redact(repr(exc))[:1000])
        return wv, [record_event(ctx, failed)]
    return new_wv, [event]


def collapse_run(entries: Sequence[Entry], keep_tokens: int) -> tuple[int, ...]:
    """Indices of the oldest contiguous run of whole raw groups whose removal leaves at most
    `keep_tokens` of entries (leading summaries stay; never a protected, pinned or elided entry)."""
    protected = selection.protected_indices(entries)
    left = sum(e.tokens for e in entries)
    run: list[int] = []
    for span in selection.spans_from_start(entries, len(entries)):
        if left <= keep_tokens:
            break
        group = range(span.start, span.end)
        if any(entries[i].kind != "message" or i in protected or entries[i].pinned or entries[i].elided
               for i in group):
            if run:
                break
            continue
        run.extend(group)
        left -= sum(entries[i].tokens for i in group)
    return tuple(run)


def collapsed_text(sources: Sequence[StoredMessage], limit_tokens: int,
                   count_text: Callable[[str], int]) -> str:
    """The run's first whole messages within `limit_tokens`, then one pointer line naming the rest."""
    head = blocks(build_source_text(list(sources[:HEAD_MESSAGES])))  # redacted, one block per message
    room = limit_tokens - count_text(pointer_line([str(m.id) for m in sources]))
    kept: list[str] = []
    for block in head:
        room -= count_text(block.text) + 2  # the blank line between blocks
        if room < 0:
            break
        kept.append(block.text)
    return "\n\n".join([*kept, pointer_line([str(m.id) for m in sources[len(kept):]])])


async def collapse_pass(ctx: PassContext, wv: WorkingView, chunk: tuple[int, ...],
                        before: int) -> tuple[WorkingView, CompactionEvent]:
    """`chunk` (raw messages) replaced by one truncation-level summary, committed with its event."""
    started = time.monotonic()
    sources = [wv.stored[wv.entries[i].seq] for i in chunk]
    limit = ctx.budget.summary_target(ctx.settings, "leaf", sum(m.token_count for m in sources))
    text = await off_loop(OFF_LOOP_MIN_CHARS, collapsed_text, sources, limit, ctx.counter.count_text)
    draft = SummaryDraft(wv.conversation_id, "leaf", 0, "truncation", text, ctx.counter.count_text(text),
                         sources[0].seq, sources[-1].seq, tuple(m.id for m in sources), (),
                         LOCAL_TRUNCATION, "")
    base = CompactionEvent(wv.conversation_id, ctx.trigger, "leaf", "truncation", "committed",
                           LOCAL_TRUNCATION, tokens_before=before, verification="not_run")
    built: list[WorkingView] = []

    def finish(record: SummaryRecord, added: list[Anchor],
               superseded: list[Anchor]) -> tuple[ContextView | None, CompactionEvent]:
        built.append(apply_summary(ctx, wv, chunk, record))
        return None, replace(base, source_message_ids=record.source_message_ids, summary_id=record.id,
                             depth=0, generation=record.generation, tokens_after=ctx.measure(built[-1]),
                             duration_ms=round((time.monotonic() - started) * 1000, 3))

    _, _, event = ctx.tenant.commit_pass(draft, [], finish)
    ctx.observer.on_step(event)
    return built[-1], event
