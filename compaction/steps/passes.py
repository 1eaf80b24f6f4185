"""One compaction pass: a chunk of the working view summarized and committed.

A pass = anchors extracted from the leaf sources, one summary down the fallback chain
(escalation.py), then in one store transaction (`TenantAccess.commit_pass`) the anchors, the summary
and the committed CompactionEvent; a failure anywhere writes only a `failed` event. A pass never
saves the view: the summary is applied to the in-memory working view, and only a step on the request
path (or an operator's) saves it, so background passes prepare summaries ahead without moving the
forwarded prefix. A summary whose rendered message is not smaller than the entries it would replace
is never committed: the pass is recorded as `skipped`. The loop choosing chunks is steps/loop.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

from compaction.anchors.extract import extract_anchors, render_anchor_block
from compaction.deadline import Deadline
from compaction.messages import strip_private_fields
from compaction.observer import CompactionObserver, NullObserver
from compaction.offload import off_loop
from compaction.steps import selection
from compaction.summarize.escalation import Detach, EscalationOutcome, summarize_with_escalation
from compaction.summarize.prompts import build_source_text
from compaction.summarize.redact import redact
from compaction.tokens import TokenCounter
from compaction.types import SummarizerChoice
from compaction.view.budget import Budget
from compaction.view.elision import KEPT_HOW, elide
from compaction.view.entry import Entry
from compaction.view.plan import Slot
from compaction.view.workview import (
    RenderSummary,
    WorkingView,
    elided_message,
    raw_message_ids,
    snapshot_anchor_ids,
    summary_entry,
)
from config.errors import SummarizerError
from config.settings import CompactionSettings
from store.interface import TenantAccess
from store.models import (
    Anchor,
    AnchorDraft,
    CompactionEvent,
    ContextView,
    StoredMessage,
    SummaryDraft,
    SummaryRecord,
)

Trigger = Literal["threshold", "hard_budget", "manual"]
ELISION_MODEL = "local/elision"  # provenance name of an in-place elision
ANCHOR_TEXT_MAX = 100_000  # anchors handed to the verifier are not budget-bound
# The growth check renders the summary before the store assigns its id ("sum_" + 12 hex, shown twice
# at most): a placeholder id may tokenize differently by up to one token per character, plus borders.
ID_TOKENS_SLACK = 2 * (12 + 2)
_PLACEHOLDER_ID = "sum_" + "0" * 12
CHARS_PER_TOKEN = 4  # about, for English and code: sizes work for `off_loop` from token counts


@dataclass(frozen=True)
class PassContext:
    tenant: TenantAccess
    choice: SummarizerChoice
    counter: TokenCounter
    settings: CompactionSettings
    trigger: Trigger
    render: RenderSummary
    measure: Callable[[WorkingView], int]  # input tokens the planned request would have
    budget: Budget  # fresh-tail cap (fresh_tail_max) and summary sizes scale to it
    observer: CompactionObserver = field(default_factory=NullObserver)  # hears every recorded step
    deadline: Deadline = field(default_factory=Deadline.never)  # request path: LLM levels until then
    detach: Detach | None = None  # takes over an LLM call the deadline cut, to finish off the path
    # background: a request of the conversation is waiting for it (the step stops after its pass)
    interrupted: Callable[[], bool] = field(default=lambda: False)


@dataclass(frozen=True)
class Candidate:
    """A chunk to compact: leaf/condensed summaries, or one old oversized tool result to elide in
    place down to `allowance` tokens."""

    kind: Literal["leaf", "condensed", "elide"]
    chunk: tuple[int, ...]
    allowance: int = 0
    pointer: str = ""  # an elision replacing the whole text by this note (a superseded output)


def chunk_refs(wv: WorkingView, chunk: Sequence[int]) -> tuple[str, ...]:
    """What a chunk covers, stable across view versions (indices are not)."""
    return tuple(f"{wv.entries[i].kind}:{wv.entries[i].ref}" for i in chunk)


async def run_pass(ctx: PassContext, wv: WorkingView, cand: Candidate,
                   before: int) -> tuple[WorkingView, CompactionEvent]:
    """One pass; failures become a `failed` event and leave the view (and the store) unchanged."""
    kind = cand.kind
    started = time.monotonic()
    if kind == "elide":
        try:
            return elide_pass(ctx, wv, cand, before)
        except Exception as exc:  # recorded like any failed pass, never surfaced
            failed = CompactionEvent(wv.conversation_id, ctx.trigger, "leaf", "elision", "failed",
                                     ELISION_MODEL, tokens_before=before, tokens_after=before,
                                     error=redact(repr(exc))[:1000], duration_ms=_ms(started))
            return wv, record_event(ctx, failed)
    chunk = [wv.entries[i] for i in cand.chunk]
    base = CompactionEvent(wv.conversation_id, ctx.trigger, kind, "normal", "failed",
                           ctx.choice.summarizer.name, dict(ctx.choice.settings), tokens_before=before)
    try:
        size = sum(e.tokens for e in chunk) * CHARS_PER_TOKEN
        drafts = await off_loop(size, _anchor_drafts, wv, chunk) if kind == "leaf" else []
        outcome, draft = await _summarize(ctx, wv, kind, chunk, drafts)
        base = replace(base, level=cast(Any, outcome.level), summarizer_model=outcome.model,
                       prompt_version=outcome.prompt_version)
        grown = _growth(ctx, draft, chunk)
        if grown is not None:  # nothing committed, anchors included: the chunk stays raw
            event = replace(base, outcome="skipped", tokens_after=before, duration_ms=_ms(started),
                            error=grown, **_sources_of(chunk, wv))
            return wv, record_event(ctx, event)
        new_wv, event = _commit(ctx, wv, cand.chunk, draft, drafts, replace(base, outcome="committed"),
                                outcome, started)
    except Exception as exc:  # any failure is recorded (and observed) and retried later, never surfaced
        event = replace(base, outcome="failed", duration_ms=_ms(started),
                        error=redact(repr(exc))[:1000], tokens_after=before)
        return wv, record_event(ctx, event)
    ctx.observer.on_step(event)
    return new_wv, event


def elide_pass(ctx: PassContext, wv: WorkingView, cand: Candidate,
               before: int) -> tuple[WorkingView, CompactionEvent]:
    """One old oversized tool result elided in place (local, no summarizer): committed as a
    summary of that one message, which the view shows as the message itself (pairing kept)."""
    started = time.monotonic()
    entry = wv.entries[cand.chunk[0]]
    source = wv.stored[entry.seq]
    slot = Slot(strip_private_fields(source.message), source.token_count, "fresh_tail", entry.group,
                str(source.id))
    if cand.pointer:
        text = cand.pointer
    else:
        elided = elide(slot, cand.allowance, ctx.counter, None, KEPT_HOW)
        text = str(elided.message.get("content") or "")
    draft = SummaryDraft(wv.conversation_id, "leaf", 0, "elision", text, ctx.counter.count_text(text),
                         source.seq, source.seq, (source.id,), (), ELISION_MODEL, "")
    base = CompactionEvent(wv.conversation_id, ctx.trigger, "leaf", "elision", "committed",
                           ELISION_MODEL, tokens_before=before, source_message_ids=(source.id,))
    built: list[WorkingView] = []

    def finish(record: SummaryRecord, added: list[Anchor],
               superseded: list[Anchor]) -> tuple[ContextView | None, CompactionEvent]:
        tokens = ctx.counter.count_message(elided_message(source, record, ctx.counter.count_message).message)
        entries = list(wv.entries)
        entries[cand.chunk[0]] = replace(entry, tokens=tokens, elided=record.id)
        built.append(replace(wv, entries=tuple(entries), summaries={**wv.summaries, record.id: record}))
        return None, replace(base, summary_id=record.id, tokens_after=ctx.measure(built[-1]),
                             duration_ms=_ms(started))

    _, _, event = ctx.tenant.commit_pass(draft, [], finish)
    ctx.observer.on_step(event)
    return built[-1], event


def _commit(ctx: PassContext, wv: WorkingView, chunk: tuple[int, ...], draft: SummaryDraft,
            drafts: Sequence[AnchorDraft], base: CompactionEvent, outcome: EscalationOutcome,
            started: float) -> tuple[WorkingView, CompactionEvent]:
    """Anchors, summary and event in one store transaction (all or nothing); the view is not saved."""
    built: list[WorkingView] = []

    def finish(record: SummaryRecord, added: list[Anchor],
               superseded: list[Anchor]) -> tuple[ContextView | None, CompactionEvent]:
        new_wv = apply_summary(ctx, wv, chunk, record)
        built.append(new_wv)
        event = replace(base, source_message_ids=record.source_message_ids,
                        source_summary_ids=record.source_summary_ids, summary_id=record.id,
                        depth=record.depth, generation=record.generation,
                        tokens_after=ctx.measure(new_wv), verification=verification_of(outcome),
                        rejected_facts=outcome.rejected_facts,
                        anchors_added=tuple(a.id for a in added),
                        anchors_superseded=tuple(a.id for a in superseded), duration_ms=_ms(started))
        return None, event

    _, _, event = ctx.tenant.commit_pass(draft, drafts, finish)
    return built[-1], event


def record_event(ctx: PassContext, event: CompactionEvent) -> CompactionEvent:
    """Persist the step's provenance, then tell the observer (log line, metrics)."""
    recorded = ctx.tenant.record_event(event)
    ctx.observer.on_step(recorded)
    return recorded


def verification_of(outcome: EscalationOutcome) -> Literal["passed", "failed", "not_run"]:
    """`failed` when the verifier rejected every summary and local truncation was committed."""
    if outcome.verification == "passed":
        return "passed"
    unverified = any(a.reason == "unverified" for a in outcome.attempts)
    return "failed" if unverified else "not_run"


def _report_rejections(ctx: PassContext, cid: str, outcome: EscalationOutcome) -> None:
    for a in outcome.attempts:
        if not a.accepted:
            ctx.observer.on_level_rejected(cid, a.model, a.level, a.reason or "rejected",
                                           a.error, a.rejected_facts)


def _anchor_drafts(wv: WorkingView, chunk: list[Entry]) -> list[AnchorDraft]:
    """Anchors of a leaf chunk's sources (stored only with the summary, in its transaction)."""
    sources = [wv.stored[e.seq] for e in chunk]
    return without_secrets(extract_anchors(sources), sources)


def without_secrets(drafts: Sequence[AnchorDraft],
                    sources: Sequence[StoredMessage]) -> list[AnchorDraft]:
    """Anchors travel raw and are stored: only values that survive redaction of their source.

    A pinned message is kept with its secrets redacted (the pin matters more than verbatim text).
    """
    redacted = {m.id: build_source_text([m]) for m in sources}  # build_source_text redacts
    everything = "\n".join(redacted.values())
    kept: list[AnchorDraft] = []
    for d in drafts:
        if d.kind == "pinned":
            kept.append(replace(d, value=redact(d.value)))
        elif d.value in redacted.get(d.source_message_id or -1, everything) and redact(d.key) == d.key:
            kept.append(d)
    return kept


async def _summarize(ctx: PassContext, wv: WorkingView, kind: Literal["leaf", "condensed"],
                     chunk: list[Entry], drafts: Sequence[AnchorDraft]
                     ) -> tuple[EscalationOutcome, SummaryDraft]:
    """The escalated summary of `chunk`, as a draft (not stored yet: it may not shrink anything),
    verified against the anchors as they will be once the chunk's own anchors are stored."""
    items: list[StoredMessage | SummaryRecord] = (
        [wv.stored[e.seq] for e in chunk] if kind == "leaf" else [wv.summaries[e.ref] for e in chunk])
    anchors = (ctx.tenant.preview_anchors(wv.conversation_id, drafts) if drafts
               else ctx.tenant.anchors(wv.conversation_id))
    block = render_anchor_block(anchors, max_tokens=ANCHOR_TEXT_MAX, counter=ctx.counter)
    input_tokens = sum(e.tokens for e in chunk)
    sources_text = await off_loop(input_tokens * CHARS_PER_TOKEN, build_source_text, items)  # redacts
    outcome = await summarize_with_escalation(
        ctx.choice.summarizer, kind=kind, sources_text=sources_text,
        anchors_text=str(block["content"]) if block else "",
        target_tokens=ctx.budget.summary_target(ctx.settings, kind, input_tokens),
        counter=ctx.counter, input_tokens=input_tokens, deadline=ctx.deadline, detach=ctx.detach)
    _report_rejections(ctx, wv.conversation_id, outcome)
    if not outcome.ok:  # no level produced committable text: a failed pass, nothing stored
        raise SummarizerError(outcome.failure or "the summary is empty")
    return outcome, _draft(wv.conversation_id, kind, items, outcome)


def _growth(ctx: PassContext, draft: SummaryDraft, chunk: list[Entry]) -> str | None:
    """Why committing `draft` would not shrink the context (None when it would)."""
    provisional = SummaryRecord(_PLACEHOLDER_ID, draft.conversation_id, draft.kind, draft.depth, 0,
                                draft.level, draft.content, draft.token_count, draft.first_seq,
                                draft.last_seq, draft.source_message_ids, draft.source_summary_ids,
                                draft.model, draft.prompt_version)
    rendered = ctx.counter.count_message(ctx.render(provisional)) + ID_TOKENS_SLACK
    replaced = sum(e.tokens for e in chunk)
    if rendered < replaced:
        return None
    return (f"not_smaller: the rendered summary (~{rendered} tokens) would not be smaller than the "
            f"{len(chunk)} entries it replaces ({replaced} tokens)")


def _sources_of(chunk: list[Entry], wv: WorkingView) -> dict[str, Any]:
    """Event provenance of a chunk that was not summarized."""
    return {"source_message_ids": tuple(wv.stored[e.seq].id for e in chunk if e.kind == "message"),
            "source_summary_ids": tuple(e.ref for e in chunk if e.kind == "summary")}


def _draft(cid: str, kind: Literal["leaf", "condensed"], items: list[StoredMessage | SummaryRecord],
           outcome: EscalationOutcome) -> SummaryDraft:
    messages = [i for i in items if isinstance(i, StoredMessage)]
    summaries = [i for i in items if isinstance(i, SummaryRecord)]
    first = min([m.seq for m in messages] + [x.first_seq for x in summaries])
    last = max([m.seq for m in messages] + [x.last_seq for x in summaries])
    depth = 0 if kind == "leaf" else max(x.depth for x in summaries) + 1
    level: Any = outcome.level
    return SummaryDraft(cid, kind, depth, level, outcome.text, outcome.token_count, first, last,
                        tuple(m.id for m in messages), tuple(x.id for x in summaries),
                        outcome.model, outcome.prompt_version)


def apply_summary(ctx: PassContext, wv: WorkingView, chunk: Sequence[int],
                  record: SummaryRecord) -> WorkingView:
    """The working view with the chunk replaced by the summary (a step saves it, or not)."""
    group = max((e.group for e in wv.entries), default=0) + 1
    entry = summary_entry(record, ctx.render, ctx.counter.count_recurring, group)
    entries = selection.replace(wv.entries, chunk, entry)
    anchor_ids = snapshot_anchor_ids(ctx.tenant.anchors(wv.conversation_id), raw_message_ids(entries))
    return replace(wv, entries=tuple(entries), summaries={**wv.summaries, record.id: record},
                   anchor_ids=anchor_ids)


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 3)
