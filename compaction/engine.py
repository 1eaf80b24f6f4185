"""The compaction engine: what the provider sees for each chat request (design: the whole brief).

prepare(): validate, ingest, plan the working view within budget, compact synchronously only when
over the hard budget, truncate as the last resort, validate the outgoing list, record it.
after_turn(): schedule threshold compaction in the background. The view (and its anchor block)
changes only at compaction steps, so forwarded requests between steps extend each other.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import structlog

from compaction import passes, recall, truncate, workview
from compaction.background import BackgroundCompactor
from compaction.budget import Budget
from compaction.messages import strip_private_fields, validate_messages
from compaction.observer import CompactionObserver, NullObserver, ObservedSummarizer
from compaction.passes import PassContext, Trigger
from compaction.planner import Plan
from compaction.summarizers import CircuitBreaker
from compaction.tokens import TOOLS_FRAMING, TokenCounter
from compaction.toolpairs import validate_outgoing
from compaction.types import ChatTurn, PassMode, PreparedRequest, Summarizer, SummarizerChoice
from compaction.view_plan import RequestContext, measure_stored, plan_for
from compaction.workview import WorkingView
from config.errors import StoreError, SummarizerError
from config.settings import LOCAL_EXTRACTIVE, Settings
from store.interface import StoreBackend
from store.models import CompactionEvent, ForwardedRecord, StoredMessage

log = structlog.get_logger(__name__)
TRUNCATION_MODEL = "local/truncation"  # provenance name of deterministic last-resort truncation
SummarizerFor = Callable[[ChatTurn], SummarizerChoice]


@dataclass(frozen=True)
class _Outcome:
    plan: Plan
    events: tuple[CompactionEvent, ...]
    waited: bool
    forced: bool
    view_version: int  # the newest persisted view when the plan was made (recorded with it)


class Engine:
    """Owns per-conversation locks, circuit breakers and the background compactor.

    `observer` hears every compaction step, summariser call and circuit transition (the proxy
    turns them into log lines and metrics); by default nobody listens.
    """

    def __init__(self, store: StoreBackend, settings: Settings, summarizer_for: SummarizerFor, *,
                 background: BackgroundCompactor | None = None,
                 observer: CompactionObserver | None = None) -> None:
        self.store = store
        self.settings = settings
        self._summarizer_for = summarizer_for
        self.observer: CompactionObserver = observer or NullObserver()
        self.background = background or BackgroundCompactor(on_error=self.observer.on_background_error)
        # One lock per conversation while someone holds or waits on it (weak: no growth).
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._breakers: dict[tuple[str, str], ObservedSummarizer] = {}
        self._observed: dict[int, ObservedSummarizer] = {}  # local summarisers, by identity
        self._recall_schema_tokens: dict[str, int] = {}  # by tokenizer: the schemas never change

    async def prepare(self, turn: ChatTurn) -> PreparedRequest:
        """The forwarded request for `turn`: within budget, tool pairs intact, recorded."""
        messages = validate_messages(list(turn.messages))
        ctx = self._context(turn, messages)
        outcome = await self._fit(ctx)
        forwarded = outcome.plan.messages
        validate_outgoing(forwarded, messages)  # a failure here is a ctxproxy bug: let it raise
        return self._record(ctx, outcome)

    def record_reply(self, prepared: PreparedRequest, turn: ChatTurn, message: dict[str, Any]) -> None:
        """Store the provider's reply to the request's last message (counted once with the
        conversation model's tokenizer); a regenerated reply branches there (store/reply.py)."""
        if prepared.last_seq is None:
            raise StoreError("internal: a prepared request without its last message seq")
        clean = strip_private_fields(message)
        tenant = self.store.for_tenant(turn.tenant_id)
        tenant.append_reply(prepared.conversation_id, clean,
                            TokenCounter.for_model(turn.model).count_message(clean),
                            parent_seq=prepared.last_seq, parent_chain=prepared.last_chain_hash)

    def after_turn(self, prepared: PreparedRequest, turn: ChatTurn) -> bool:
        """Schedule a threshold compaction step when due; True when one was scheduled."""
        s = turn.settings
        threshold = Budget.for_turn(turn, 0).threshold  # tools do not change the input budget
        due = (s.enabled and s.background and prepared.tokens_forwarded > threshold
               and len(turn.messages) >= s.summarize_message_threshold)
        if due:
            cid = prepared.conversation_id
            self.background.schedule(cid, lambda: self._threshold_step(turn, cid))
        return due

    async def compact(self, turn: ChatTurn, conversation_id: str,
                      trigger: Trigger = "manual") -> list[CompactionEvent]:
        """Run one compaction step now (operators): `turn` names the tenant, model and summariser."""
        return await self._step(turn, conversation_id, trigger)

    async def aclose(self) -> None:
        await self.background.aclose()

    def _lock(self, conversation_id: str) -> asyncio.Lock:
        """The conversation's lock, shared by everyone currently using it."""
        lock = self._locks.get(conversation_id)
        if lock is None:
            lock = self._locks[conversation_id] = asyncio.Lock()
        return lock

    # -- request path ---------------------------------------------------------------------------

    def _context(self, turn: ChatTurn, messages: list[dict[str, Any]]) -> RequestContext:
        counter = TokenCounter.for_model(turn.model)
        client_tools = counter.count_tools(turn.tools)
        budget = Budget.for_turn(turn, self._tools_tokens(turn, counter, client_tools))
        tenant = self.store.for_tenant(turn.tenant_id)
        ingest = tenant.ingest(messages, model=turn.model, external_id=turn.external_conversation_id,
                               count_tokens=lambda m: counter.count_message(strip_private_fields(m)))
        ingest = replace(ingest, messages=recounted(ingest.conversation.model, ingest.messages, counter))
        return RequestContext(turn, messages, ingest, counter, budget, tenant, self.settings.recall,
                              client_tools)

    async def _fit(self, ctx: RequestContext) -> _Outcome:
        wv = self._load(ctx)
        plan = plan_for(ctx, wv)
        events: list[CompactionEvent] = []
        waited = False
        if plan.tokens > ctx.budget.total and ctx.turn.settings.enabled:
            lock = self._lock(ctx.conversation_id)
            waited = lock.locked()
            async with lock:  # a running background step finishes first instead of racing
                wv = self._load(ctx)
                plan = plan_for(ctx, wv)
                if plan.tokens > ctx.budget.total:
                    pctx = self._pass_context(ctx.turn, ctx.budget, "hard_budget", ctx)
                    wv, events = await passes.compact_until(
                        pctx, wv, ctx.budget.total, modes=("hard", "unprotected"))
                    plan = plan_for(ctx, wv)
        waited = waited or bool(events)  # summariser passes ran on the request path
        before, started = plan.tokens, time.monotonic()
        plan, forced = truncate.fit(plan, ctx.counter.count_message, ctx.counter.count_text,
                                    ctx.expand_tool)
        if forced:
            events.append(self._truncation_event(ctx, before, plan.tokens, started))
        return _Outcome(plan, tuple(events), waited, forced, wv.latest_version)

    def _truncation_event(self, ctx: RequestContext, before: int, after: int,
                          started: float) -> CompactionEvent:
        """Deterministic truncation is a compaction step too: recorded and observed like the rest."""
        event = CompactionEvent(ctx.conversation_id, "hard_budget", "truncation", "truncation",
                                "committed", TRUNCATION_MODEL, tokens_before=before, tokens_after=after,
                                duration_ms=(time.monotonic() - started) * 1000)
        recorded = ctx.tenant.record_event(event)
        self.observer.on_step(recorded)
        return recorded

    def _load(self, ctx: RequestContext) -> WorkingView:
        return workview.load(ctx.tenant, ctx.conversation_id, last_seq=ctx.last_seq,
                             render=ctx.render_summary, count=ctx.counter.count_message,
                             messages=ctx.ingest.messages)

    def _record(self, ctx: RequestContext, out: _Outcome) -> PreparedRequest:
        plan = out.plan
        compacted = bool(plan.summary_ids) or out.forced or any(
            s.category == "anchors" for s in plan.slots)
        prepared = PreparedRequest(ctx.conversation_id, plan.messages, tuple(ctx.turn.tools),
                                   ctx.tokens_received, plan.tokens, ctx.budget.total, compacted,
                                   plan.summary_ids, plan.occupancy, out.waited, out.forced, None,
                                   out.events, recall_offered=ctx.turn.offer_recall,
                                   last_seq=ctx.last_seq,
                                   last_chain_hash=ctx.ingest.messages[-1].chain_hash)
        if plan.tools_tokens != ctx.client_tools_tokens and not recall.should_offer(
                prepared, self.settings.recall):
            # Budgeted for, but not sent this turn (nothing hidden): count only what is forwarded.
            plan = replace(plan, tools_tokens=ctx.client_tools_tokens)
        occupancy = plan.occupancy
        rec = ForwardedRecord(ctx.conversation_id, prefix_hashes(plan.messages), ctx.tokens_received,
                              plan.tokens, ctx.budget.total, occupancy.as_dict(), compacted,
                              out.view_version)
        return replace(prepared, tokens_forwarded=plan.tokens, occupancy=occupancy,
                       prefix_stable=ctx.tenant.record_forwarded(rec))

    def _tools_tokens(self, turn: ChatTurn, counter: TokenCounter, client_tools: int) -> int:
        """Tool schemas in the budget: the client's, plus the recall tools whenever this request may
        offer them (sent in the same `tools` list, so the list framing is paid once)."""
        if not turn.offer_recall:
            return client_tools
        schemas = self._recall_schema_tokens.get(counter.encoding_name)
        if schemas is None:
            schemas = counter.count_tools(recall.tool_schemas(self.settings.recall))
            self._recall_schema_tokens[counter.encoding_name] = schemas
        return client_tools + schemas - (TOOLS_FRAMING if client_tools else 0)

    # -- compaction steps -----------------------------------------------------------------------

    async def _threshold_step(self, turn: ChatTurn, conversation_id: str) -> None:
        await self._step(turn, conversation_id, "threshold")

    async def _step(self, turn: ChatTurn, cid: str, trigger: Trigger) -> list[CompactionEvent]:
        """Compact down to the target (a step), under the conversation's lock."""
        counter = TokenCounter.for_model(turn.model)
        budget = Budget.for_turn(turn, self._tools_tokens(turn, counter, counter.count_tools(turn.tools)))
        async with self._lock(cid):
            pctx = self._pass_context(turn, budget, trigger, None)
            tenant = self.store.for_tenant(turn.tenant_id)
            stored = recounted(tenant.conversation(cid).model, tenant.messages(cid), counter)
            wv = workview.load(tenant, cid, last_seq=None, render=pctx.render,
                               count=counter.count_message, messages=stored)
            limit = budget.target if trigger != "manual" else 0
            modes: tuple[PassMode, ...] = ("normal", "hard") if trigger == "threshold" else ("normal",)
            _, events = await passes.compact_until(pctx, wv, limit, modes=modes)
        failed = [e for e in events if e.outcome == "failed"]
        if failed:
            raise SummarizerError(f"compaction step failed: {failed[-1].error}",  # retried in background
                                  code="compaction_failed")
        return events

    def _pass_context(self, turn: ChatTurn, budget: Budget, trigger: Trigger,
                      ctx: RequestContext | None) -> PassContext:
        counter = TokenCounter.for_model(turn.model)
        tenant = self.store.for_tenant(turn.tenant_id)
        render = ctx.render_summary if ctx else RequestContext.renderer(self.settings.recall,
                                                                        turn.offer_recall)

        def measure(wv: WorkingView) -> int:
            if ctx is not None:
                return plan_for(ctx, wv).tokens
            return measure_stored(wv, budget, counter, tenant)

        return PassContext(tenant, self._choice(turn), counter, turn.settings, trigger, render,
                           measure, budget, self.observer,
                           tail_target=budget.target if trigger == "threshold" else None)

    def _choice(self, turn: ChatTurn) -> SummarizerChoice:
        """The turn's summariser, observed, behind one circuit breaker per (tenant, endpoint).

        The endpoint is the summariser's stable identity (model, api_base, key hash), not the
        instance: a re-created instance (e.g. evicted from a cache) keeps its breaker's count.
        """
        choice = self._summarizer_for(turn)
        if choice.summarizer.name == LOCAL_EXTRACTIVE:
            return SummarizerChoice(self._observe_local(choice.summarizer), choice.settings)
        endpoint = getattr(choice.summarizer, "endpoint", None)
        if not isinstance(endpoint, str):
            endpoint = f"{choice.summarizer.name}|{choice.settings.get('api_base') or ''}"
        key = (turn.tenant_id, endpoint)
        found = self._breakers.get(key)
        breaker = found.inner if found is not None else None
        if found is None or not isinstance(breaker, CircuitBreaker):
            s = self.settings.summarizer
            found = self._breakers[key] = ObservedSummarizer(
                CircuitBreaker(choice.summarizer, failures=s.breaker_failures,
                               reset_s=s.breaker_reset_s), self.observer)
        else:
            breaker.inner = choice.summarizer  # same endpoint: the current instance, same count
        return SummarizerChoice(found, choice.settings)

    def _observe_local(self, summarizer: Summarizer) -> ObservedSummarizer:
        """One observing wrapper per local summariser instance (no breaker: it cannot fail)."""
        observed = self._observed.get(id(summarizer))
        if observed is None or observed.inner is not summarizer:
            observed = self._observed[id(summarizer)] = ObservedSummarizer(summarizer, self.observer)
        return observed


def recounted(stored_model: str, messages: Sequence[StoredMessage],
              counter: TokenCounter) -> tuple[StoredMessage, ...]:
    """`messages` with token counts valid for `counter` (planning only; the store is not rewritten).

    Stored counts were made with the conversation model's tokenizer; a request naming a model with
    another encoding (o200k -> cl100k, an HF tokenizer) would otherwise be planned with wrong sizes.
    """
    if TokenCounter.for_model(stored_model).encoding_name == counter.encoding_name:
        return tuple(messages)
    return tuple(replace(m, token_count=counter.count_message(strip_private_fields(m.message)))
                 for m in messages)


def prefix_hashes(messages: tuple[dict[str, Any], ...]) -> tuple[str, ...]:
    """Running sha256 per forwarded message: equal prefixes give equal leading hashes."""
    out: list[str] = []
    previous = ""
    for message in messages:
        canonical = json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        previous = hashlib.sha256((previous + canonical).encode()).hexdigest()
        out.append(previous)
    return tuple(out)
