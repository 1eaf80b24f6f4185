"""The compaction engine: what the provider sees for each chat request.

prepare(): validate, ingest (a fork adopts its parent's summaries), plan the working view within
budget, and only when it does not fit take a step: substitute summaries prepared ahead for the
oldest chunks, summarize more if needed (LLM until the deadline, then local levels), landing at the
target with the newest raw messages filling the rest; truncate as the last resort; validate the
outgoing list; record it. after_turn(): above the threshold, prepare summaries in the background
without moving the view. The view (and its anchor block) changes only at a step, so forwarded
requests between steps extend each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import os
import secrets
import socket
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import structlog

from compaction.deadline import Deadline
from compaction.messages import strip_private_fields, validate_resent
from compaction.observer import CompactionObserver, NullObserver
from compaction.recall import tools as recall
from compaction.resend import early_forward
from compaction.resend.early_forward import EarlyForward
from compaction.resend.previous import RESENDS, Expected, Resent
from compaction.steps import forks, loop
from compaction.steps.background import BackgroundCompactor
from compaction.steps.claims import StepClaims
from compaction.steps.collapse import collapse_far_over
from compaction.steps.passes import PassContext, Trigger
from compaction.steps.quiet import QuietConversations
from compaction.summarize.breakers import SummarizerPool
from compaction.tokens import TOOLS_FRAMING, TokenCounter
from compaction.toolpairs import validate_outgoing
from compaction.types import ChatTurn, PreparedRequest, SummarizerChoice
from compaction.view import truncate, workview
from compaction.view.budget import Budget
from compaction.view.plan import REPLY_PRIMING, Plan
from compaction.view.request_plan import RequestContext, measure_request, measure_stored, plan_for
from compaction.view.workview import WorkingView
from config.errors import StoreError, SummarizerError
from config.settings import Settings
from store.encoding.fastjson import dumps_sorted
from store.encoding.running_hashes import RunningHashes, exact_json
from store.interface import StoreBackend, TenantAccess
from store.models import (
    CompactionEvent,
    ContextView,
    Conversation,
    ForwardedRecord,
    IngestResult,
    Message,
    StoredMessage,
)

log = structlog.get_logger(__name__)
# A request this large is tokenised in a worker thread before ingest (a resent 100k-token history,
# ~400k characters, stays on the loop: only its few new messages are counted).
PRECOUNT_CHARS = 2_000_000
PRECOUNT_MESSAGES = 5_000
READ_PAGE_MESSAGES = 2_000  # stored messages a background step reads at a time
INGEST_SLICE_MESSAGES = 250  # new messages stored per transaction of a long history: ~25 ms each
ELISION_MODEL = "local/elision"  # provenance name of request-time elision (truncate.py)
SummarizerFor = Callable[[ChatTurn], SummarizerChoice]


@dataclass(frozen=True)
class EarlyStart:
    """A request forwarded before its bookkeeping (`Engine.early`): what its full preparation
    resumes from."""

    sent: PreparedRequest
    resent: Resent
    messages: list[Message]  # validated
    expected: Expected
    counts: dict[int, int]  # token counts already made (by `id`)


@dataclass(frozen=True)
class _Outcome:
    plan: Plan
    events: tuple[CompactionEvent, ...]
    waited: bool
    forced: bool
    view_version: int  # the newest persisted view when the plan was made (recorded with it)


class Engine:
    """Owns per-conversation locks, circuit breakers and the background compactor.

    `observer` hears every compaction step, summarizer call and circuit transition (the proxy
    turns them into log lines and metrics); by default nobody listens.
    """

    def __init__(self, store: StoreBackend, settings: Settings, summarizer_for: SummarizerFor, *,
                 background: BackgroundCompactor | None = None,
                 observer: CompactionObserver | None = None,
                 on_close: Callable[[], Awaitable[None]] | None = None) -> None:
        self.store = store
        self.settings = settings
        self._summarizer_for = summarizer_for
        self._on_close = on_close  # the summarizer chooser's resources (an HTTP session), closed last
        self.observer: CompactionObserver = observer or NullObserver()
        self.background = background or BackgroundCompactor(on_error=self.observer.on_background_error)
        # One lock per conversation while someone holds or waits on it (weak: no growth).
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._pool = SummarizerPool(settings.summarizer, self.observer)
        self._recall_schema_tokens: dict[str, int] = {}  # by tokenizer: the schemas never change
        # Who claims compaction steps in the shared store: this process, this engine (claims.py).
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._claims = StepClaims(self.holder, settings.store.lease_s)
        # no background step while one would find nothing new
        self._quiet = QuietConversations(name="idle_steps")

    def early(self, turn: ChatTurn) -> EarlyStart | None:
        """The forwarded request of `turn`, known before its bookkeeping when it resends a
        passthrough (compaction/resend/early_forward.py); bounded work on the caller's thread, no store
        read. Its full preparation is `prepare(turn, start=...)`. Raises on invalid new messages."""
        counter = TokenCounter.if_loaded(turn.model)
        resent = None if counter is None else RESENDS.extension(
            turn.tenant_id, turn.external_conversation_id, turn.messages)
        if counter is None or resent is None or resent.passing is None:
            return None
        messages, expected = validate_resent(resent.messages, resent.keys, valid=resent.shared,
                                             expected=resent.expected)
        made = early_forward.extended(resent.passing, turn, messages, counter, resent.blob)
        return None if made is None else EarlyStart(made[0], resent, messages, expected, made[1])

    async def prepare(self, turn: ChatTurn, early: EarlyForward | None = None,
                      start: EarlyStart | None = None) -> PreparedRequest:
        """The forwarded request for `turn`: within budget, tool pairs intact, recorded.

        `early` is handed the forwarded request as soon as it is certain, before the bookkeeping
        (compaction/resend/early_forward.py); `start`: it was forwarded already (`early`). The result is
        the full preparation, recorded: when an early forward's premises fail, planned in full."""
        if start is None:
            # Encoded once (validation, identity and forwarded hashes share the keys); the leading
            # messages the previous request had are its own dicts, validated then (resend/previous.py).
            resent = RESENDS.resent(turn.tenant_id, turn.external_conversation_id, list(turn.messages))
            messages, expected = validate_resent(resent.messages, resent.keys, valid=resent.shared,
                                                 expected=resent.expected)
            counter = await TokenCounter.for_model_async(turn.model)
            sent, counted = await self._forward_early(turn, resent, messages, counter, early)
        else:
            resent, messages, expected, sent = start.resent, start.messages, start.expected, start.sent
            counter, counted = TokenCounter.for_model(turn.model), start.counts  # loaded: `early` found it
        ctx = await self._context(turn, messages, resent, counter, counted)
        await _breathe(ctx)
        if sent is not None and early_forward.confirmed(sent, ctx.conversation_id, ctx.tokens_received,
                                                       len(ctx.ingest.messages)) \
                and ctx.tenant.view(ctx.conversation_id) is None:
            prepared, view_version = self._recorded(ctx, sent, received_tokens(ctx, sent)), 0
        else:
            outcome = await self._fit(ctx)
            validate_outgoing(outcome.plan.messages, messages)  # failing: a ctxproxy bug, raised
            prepared, view_version = self._record(ctx, outcome), outcome.view_version
        if sent is not None and (differ := early_forward.differences(sent, prepared)):
            self.observer.on_early_mismatch(prepared.conversation_id, differ)
        counts = tuple(m.token_count for m in ctx.ingest.messages)
        RESENDS.keep(resent, expected,
                     early_forward.passthrough(prepared, messages, turn, view_version, counts))
        return prepared

    def note_cache_read(self, prepared: PreparedRequest, turn: ChatTurn, tokens: int) -> None:
        """The provider's reported cache reads, kept with the request's forwarded record."""
        self.store.for_tenant(turn.tenant_id).note_cache_read(prepared.conversation_id, tokens)

    def record_reply(self, prepared: PreparedRequest, turn: ChatTurn, message: Message) -> None:
        """Store the provider's reply to the request's last message (counted once with the
        conversation model's tokenizer); a regenerated reply branches there (store/history/reply.py)."""
        if prepared.last_seq is None:
            raise StoreError("internal: a prepared request without its last message seq")
        clean = strip_private_fields(message)
        tenant = self.store.for_tenant(turn.tenant_id)
        stored = tenant.append_reply(prepared.conversation_id, clean,
                                     TokenCounter.for_model(turn.model).count_message(clean),
                                     parent_seq=prepared.last_seq, parent_chain=prepared.last_chain_hash)
        RESENDS.replied(turn.tenant_id, turn.external_conversation_id, turn.messages, stored)

    def after_turn(self, prepared: PreparedRequest, turn: ChatTurn) -> bool:
        """Schedule a background step (preparing summaries) when due; True when one was scheduled."""
        s = turn.settings
        threshold = Budget.for_turn(turn, 0).threshold  # tools do not change the input budget
        cid, tokens = prepared.conversation_id, prepared.tokens_received
        due = (s.enabled and s.background and prepared.tokens_forwarded > threshold
               and len(turn.messages) >= s.summarize_message_threshold and self._quiet.due(cid, tokens))
        if due:
            self.background.schedule(cid, lambda: self._threshold_step(turn, cid, tokens))
        return due

    async def compact(self, turn: ChatTurn, conversation_id: str,
                      trigger: Trigger = "manual") -> list[CompactionEvent]:
        """Run one compaction step now (operators): `turn` names the tenant, model and summarizer.

        `manual` compacts as far as normal passes go and saves the view, after any other step on
        the conversation (waiting up to `store.lease_s` for it); `threshold` prepares."""
        if trigger != "manual":
            return await self._step(turn, conversation_id, trigger)
        tenant = self.store.for_tenant(turn.tenant_id)
        deadline = Deadline.after(self._claims.lease_s)
        async with self._lock(conversation_id), self._claims.waiting(tenant, conversation_id, deadline):
            return await self._step(turn, conversation_id, trigger)

    async def aclose(self) -> None:
        await self.background.aclose()
        if self._on_close is not None:
            await self._on_close()

    def _lock(self, conversation_id: str) -> asyncio.Lock:
        """The conversation's lock, shared by everyone currently using it."""
        lock = self._locks.get(conversation_id)
        if lock is None:
            lock = self._locks[conversation_id] = asyncio.Lock()
        return lock

    # -- request path ---------------------------------------------------------------------------

    async def _forward_early(self, turn: ChatTurn, resent: Resent, messages: list[Message],
                             counter: TokenCounter, early: EarlyForward | None
                             ) -> tuple[PreparedRequest | None, dict[int, int]]:
        """Hand `early` the forwarded request when it is known before the bookkeeping (as `early`
        does on the HTTP loop, for a resend that `Engine.early` could not take, or a rebuilt
        history); returns it, with the token counts of the messages it counted (by `id`)."""
        if early is None:
            return None, {}
        made = None
        if resent.passing is not None:
            made = early_forward.extended(resent.passing, turn, messages, counter, resent.blob)
        elif resent.rebuilding is not None:
            made = early_forward.rebuilt(resent.rebuilding, resent.dropped, turn, messages, counter,
                                         resent.blob)
        if made is None:
            return None, {}
        await early(made[0])
        return made

    async def _context(self, turn: ChatTurn, messages: list[Message], resent: Resent, counter: TokenCounter,
                       counted: Mapping[int, int]) -> RequestContext:
        """The request's context: its history stored (`counted`: the counts made already, by `id`)."""
        client_tools = counter.count_tools(turn.tools)
        budget = Budget.for_turn(turn, self._tools_tokens(turn, counter, client_tools))
        tenant = self.store.for_tenant(turn.tenant_id)
        ingest = await _ingest(tenant, turn, messages, resent, counter, counted)
        if ingest.forked and turn.settings.enabled:
            forks.adopt_parent_summaries(tenant, ingest)
        ingest = replace(ingest, messages=recounted(ingest.conversation.model, ingest.messages, counter))
        return RequestContext(turn, messages, ingest, counter, budget, tenant, self.settings.recall,
                              client_tools, resent.keys)

    async def _fit(self, ctx: RequestContext) -> _Outcome:
        wv = self._load(ctx)
        await _breathe(ctx)
        plan = plan_for(ctx, wv)
        await _breathe(ctx)
        events: list[CompactionEvent] = []
        waited = False
        if plan.tokens > ctx.budget.total and ctx.turn.settings.enabled:
            _check_last_message(ctx, plan)
            wv, events, waited = await self._request_step(ctx, wv)
            plan = plan_for(ctx, wv)
        before, started = plan.tokens, time.monotonic()
        plan, forced = truncate.fit(plan, ctx.counter, ctx.recall_names, limit=ctx.budget.total,
                                    oversized=ctx.budget.oversized, tail_share=ctx.budget.fresh_tail_max,
                                    last_message=ctx.turn.settings.oversized_last_message)
        if forced:
            events.append(self._elision_event(ctx, before, plan.tokens, started))
        return _Outcome(plan, tuple(events), waited, forced, wv.latest_version)

    async def _request_step(self, ctx: RequestContext,
                            loaded: WorkingView) -> tuple[WorkingView, list[CompactionEvent], bool]:
        """A step on the request path: to the target before the fresh tail, then (still over) to
        the budget into it; LLM levels only until the deadline. Saves the view it lands on.
        `loaded`: the view as this request loaded it, used unless another step ran meanwhile."""
        deadline = Deadline.after(ctx.turn.settings.sync_deadline_s)
        lock = self._lock(ctx.conversation_id)
        contended = lock.locked()
        held = await _acquire(lock, deadline)  # another request's step first, within the deadline
        try:
            # Then any other step on this conversation (a background one, another replica's).
            async with self._claims.waiting(ctx.tenant, ctx.conversation_id, deadline) as claim:
                saved = ctx.tenant.view(ctx.conversation_id)  # an operator's step may have saved one
                unchanged = not contended and not claim.waited and (
                    saved.version if saved is not None else 0) == loaded.latest_version
                wv, events = await self._compact_request(ctx, deadline, loaded if unchanged else None)
        finally:
            if held:
                lock.release()
        return wv, events, contended or claim.waited or bool(events)

    async def _compact_request(self, ctx: RequestContext, deadline: Deadline,
                               current: WorkingView | None) -> tuple[WorkingView, list[CompactionEvent]]:
        """Load the newest view unless `current` is (another step may have just saved one); when the
        request is still over budget, compact: to the target before the fresh tail (prepared
        summaries first; then the summarizer while still over budget, else the local levels), then
        to the budget into it."""
        loaded = wv = current or self._load(ctx)
        await _breathe(ctx)
        events: list[CompactionEvent] = []
        before = measure_request(ctx, wv)
        if before > ctx.budget.total:
            pctx = self._pass_context(ctx.turn, ctx.budget, "hard_budget", ctx, deadline)
            wv, events = await collapse_far_over(pctx, wv, before)  # an imported history: collapsed first
            await _breathe(ctx)
            wv, more = await loop.compact_until(pctx, wv, ctx.budget.target, reach="before_tail",
                                                 ceiling=ctx.budget.total, summarize=False)
            events += more
            landed = measure_request(ctx, wv)
            if landed > ctx.budget.total:  # what was prepared is not enough
                wv, more = await loop.compact_until(pctx, wv, ctx.budget.target, reach="before_tail",
                                                     ceiling=ctx.budget.total)
                events += more
            elif landed > ctx.budget.target + loop.landing_tolerance(ctx.budget):
                # Prepared summaries ran out above the target: the next requests would step again
                # (another cache rewrite). The local levels finish the step now, without waiting.
                wv, more = await loop.compact_until(replace(pctx, deadline=Deadline.local_only()), wv,
                                                     ctx.budget.target, reach="before_tail",
                                                     ceiling=ctx.budget.total)
                events += more
            if measure_request(ctx, wv) > ctx.budget.total:
                wv, more = await loop.compact_until(pctx, wv, ctx.budget.total, reach="into_tail")
                events += more
        if wv.entries != loaded.entries:
            wv = save_view(ctx.tenant, wv)
        return wv, events

    def _elision_event(self, ctx: RequestContext, before: int, after: int,
                       started: float) -> CompactionEvent:
        """Request-time elision is a compaction step too: recorded and observed like the rest."""
        event = CompactionEvent(ctx.conversation_id, "hard_budget", "truncation", "elision",
                                "committed", ELISION_MODEL, tokens_before=before, tokens_after=after,
                                duration_ms=(time.monotonic() - started) * 1000)
        recorded = ctx.tenant.record_event(event)
        self.observer.on_step(recorded)
        return recorded

    def _load(self, ctx: RequestContext) -> WorkingView:
        return workview.load(ctx.tenant, ctx.conversation_id, last_seq=ctx.last_seq,
                             render=ctx.render_summary, count=ctx.counter.count_recurring,
                             messages=ctx.ingest.messages)

    def _record(self, ctx: RequestContext, out: _Outcome) -> PreparedRequest:
        plan = out.plan
        compacted = bool(plan.summary_ids) or out.forced or any(
            s.category == "anchors" for s in plan.slots)
        prepared = PreparedRequest(ctx.conversation_id, plan.messages, tuple(ctx.turn.tools),
                                   ctx.tokens_received, plan.tokens, ctx.budget.total, compacted,
                                   plan.summary_ids, plan.occupancy, out.waited, out.forced, None,
                                   out.events, recall_offered=ctx.turn.offer_recall)
        if plan.tools_tokens != ctx.client_tools_tokens and not recall.should_offer(
                prepared, self.settings.recall):
            # Budgeted for, but not sent this turn (nothing hidden): count only what is forwarded.
            plan = replace(plan, tools_tokens=ctx.client_tools_tokens)
        prepared = replace(prepared, tokens_forwarded=plan.tokens, occupancy=plan.occupancy)
        return self._recorded(ctx, prepared, tuple(s.tokens for s in plan.slots), out.view_version)

    def _recorded(self, ctx: RequestContext, prepared: PreparedRequest, message_tokens: tuple[int, ...],
                  view_version: int = 0) -> PreparedRequest:
        """`prepared` with its forwarded record written (prefix stability and cost come from it) and
        the stored message its reply answers."""
        stored, schemas = ctx.ingest.messages, tools_digest(prepared.tools)
        rec = ForwardedRecord(ctx.conversation_id,
                              prefix_hashes(prepared.messages, ctx.key_by_id, ctx.conversation_id),
                              prepared.tokens_received, prepared.tokens_forwarded, prepared.budget,
                              prepared.occupancy.as_dict(), prepared.compacted, view_version,
                              message_tokens=message_tokens,
                              received_hashes=tuple(m.chain_hash for m in stored),
                              received_tokens=tuple(m.token_count for m in stored),
                              pricing=pricing_of(ctx.turn), tools_tokens=prepared.occupancy.tools,
                              tools_key=f"{prepared.occupancy.tools}:{schemas}",
                              received_tools_tokens=ctx.client_tools_tokens,
                              received_tools_key=f"{ctx.client_tools_tokens}:{schemas}")
        done = ctx.tenant.record_forwarded_cost(rec)
        return replace(prepared, prefix_stable=done.extends_previous, last_seq=ctx.last_seq,
                       last_chain_hash=stored[-1].chain_hash, prefix_tokens=done.prefix_tokens,
                       billed_input_estimate=done.billed_input_estimate,
                       full_history_billed_estimate=done.full_history_billed_estimate)

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

    # -- background and operator steps ------------------------------------------------------------

    async def _threshold_step(self, turn: ChatTurn, conversation_id: str, tokens: int) -> None:
        """Prepare summaries, once across every process sharing the store: the step runs only under
        its claim on the conversation (any other step's live claim skips it: claims.py). One that
        prepares nothing quiets the conversation until it grows (quiet.py)."""
        tenant = self.store.for_tenant(turn.tenant_id)
        async with self._claims.attempt(tenant, conversation_id) as held:
            if held:
                events = await self._step(turn, conversation_id, "threshold")
                self._quiet.settled(conversation_id, tokens, prepared_any=bool(events))

    async def _step(self, turn: ChatTurn, cid: str, trigger: Trigger) -> list[CompactionEvent]:
        """`threshold`: prepare summaries until substituting them all would reach the preparation
        limit, leaving the view alone. `manual`: compact as far as passes before the fresh tail go, save
        the view."""
        counter = TokenCounter.for_model(turn.model)
        budget = Budget.for_turn(turn, self._tools_tokens(turn, counter, counter.count_tools(turn.tools)))
        pctx = self._pass_context(turn, budget, trigger, None, Deadline.never())
        if trigger == "threshold":  # preparing ahead gives way to a request that must compact now
            pctx = replace(pctx, interrupted=self._lock(cid).locked)
        tenant = self.store.for_tenant(turn.tenant_id)
        conversation = tenant.conversation(cid)
        stored = recounted(conversation.model, await _stored_messages(tenant, conversation), counter)
        wv = workview.load(tenant, cid, last_seq=None, render=pctx.render,
                           count=counter.count_recurring, messages=stored)
        if trigger == "manual":
            new, events = await loop.compact_until(pctx, wv, 0, reach="before_tail")
            if new.entries != wv.entries:
                save_view(tenant, new)
        else:
            _, events = await loop.compact_until(pctx, wv, budget.prepare_limit, reach="before_tail")
        failed = [e for e in events if e.outcome == "failed"]
        if failed:
            raise SummarizerError(f"compaction step failed: {failed[-1].error}",  # retried in background
                                  code="compaction_failed")
        return events

    def _pass_context(self, turn: ChatTurn, budget: Budget, trigger: Trigger,
                      ctx: RequestContext | None, deadline: Deadline) -> PassContext:
        counter = TokenCounter.for_model(turn.model)
        tenant = self.store.for_tenant(turn.tenant_id)
        render = ctx.render_summary if ctx else RequestContext.renderer(self.settings.recall,
                                                                        turn.offer_recall)
        cache: dict[tuple[int, ...], int] = {}

        def measure(wv: WorkingView) -> int:
            if ctx is not None:
                return measure_request(ctx, wv)
            return measure_stored(wv, budget, counter, tenant, cache)

        return PassContext(tenant, self._choice(turn), counter, turn.settings, trigger, render,
                           measure, budget, self.observer, deadline, self.background.track)

    def _choice(self, turn: ChatTurn) -> SummarizerChoice:
        """The turn's summarizer, observed, behind its endpoint's circuit breaker (breakers.py)."""
        return self._pool.wrap(turn, self._summarizer_for(turn))


async def _acquire(lock: asyncio.Lock, deadline: Deadline) -> bool:
    """Take `lock`, waiting at most until the deadline; False when it was not taken."""
    if not lock.locked():
        await lock.acquire()
        return True
    try:
        await asyncio.wait_for(lock.acquire(), deadline.remaining())
    except TimeoutError:
        return False
    return True


def _check_last_message(ctx: RequestContext, plan: Plan) -> None:
    """A last user message that cannot fit next to the system prompt and the tool schemas is a 400
    (`reject`, the default, as the provider would answer) before any compaction work."""
    if ctx.turn.settings.oversized_last_message != "reject":
        return
    system = sum(s.tokens for s in plan.slots if s.category == "system")
    last_user = [s for s in plan.slots if s.protected and s.message.get("role") == "user"][-1:]
    needed = REPLY_PRIMING + system + plan.tools_tokens + sum(s.tokens for s in last_user)
    if last_user and needed > ctx.budget.total:
        raise truncate.last_message_too_long(ctx.budget.total, last_user[0].tokens)


def save_view(tenant: TenantAccess, wv: WorkingView) -> WorkingView:
    """Persist `wv` as the conversation's view (a step landed on it)."""
    view = tenant.save_view(ContextView(wv.conversation_id, 0, wv.items(), wv.last_seq, wv.anchor_ids))
    RESENDS.compacted(wv.conversation_id)
    return replace(wv, view=view, latest_version=view.version)


async def _breathe(ctx: RequestContext) -> None:
    """Between two phases of a long history's request (each linear in its length: hundreds of
    milliseconds at 50,000 messages), let other conversations' work run; a short one goes on."""
    if len(ctx.ingest.messages) > INGEST_SLICE_MESSAGES:
        await asyncio.sleep(0)


async def _ingest(tenant: TenantAccess, turn: ChatTurn, messages: list[Message], resent: Resent,
                  counter: TokenCounter, counted: Mapping[int, int]) -> IngestResult:
    """The request's history stored, only its new messages counted (the ones the previous request
    had, or the store holds, have their counts: a resent 50,000-message history was tokenised whole
    each turn); a long one (an imported session) in slices of `INGEST_SLICE_MESSAGES`, other
    conversations' work running between them (one transaction of 50,000 messages held the engine
    for seconds)."""
    keys, cid = resent.keys, turn.external_conversation_id
    encoded = None if resent.shared else resent.blob
    if len(messages) <= INGEST_SLICE_MESSAGES:
        counts = await precounted(counter, messages[resent.shared:], encoded=encoded, known=counted)
        return tenant.ingest(messages, model=turn.model, external_id=cid, count_tokens=counts, keys=keys)
    # Linear in the history (its chain hashes, its stored prefix read back: ~0.8 s at 50,000
    # messages) and thread-safe: in a worker thread, the engine's other conversations go on meanwhile.
    ahead = await asyncio.to_thread(functools.partial(tenant.read_ahead, messages, external_id=cid,
                                                      keys=keys))
    counts = await precounted(counter, messages[max(resent.shared, ahead.keep):],
                              encoded=None if ahead.keep else encoded, known=counted)
    for result in tenant.ingest_slices(messages, model=turn.model, external_id=cid, count_tokens=counts,
                                       keys=keys, size=INGEST_SLICE_MESSAGES, ahead=ahead):
        if result is not None:
            return result
        await asyncio.sleep(0)
    raise StoreError("internal: a sliced ingest ended without its result")


async def _stored_messages(tenant: TenantAccess, conversation: Conversation) -> list[StoredMessage]:
    """Every stored message of `conversation`, read `READ_PAGE_MESSAGES` at a time, other
    conversations' work running between pages (a background step over an imported history read
    50,000 at once). Live seqs run 0..message_count-1; what was appended meanwhile comes last."""
    cid, count = conversation.id, conversation.message_count
    out: list[StoredMessage] = []
    for start in range(0, count, READ_PAGE_MESSAGES):
        out += tenant.messages(cid, start_seq=start, end_seq=min(count, start + READ_PAGE_MESSAGES))
        await asyncio.sleep(0)
    return out + tenant.messages(cid, start_seq=count)


async def precounted(counter: TokenCounter, messages: list[Message], encoded: bytes | None = None,
                     known: Mapping[int, int] | None = None) -> Callable[[Message], int]:
    """The token counter ingest uses; for a large request every message is counted in a worker
    thread first (tokenising megabytes would stall the loop), a small one is counted as stored.
    `encoded`: the messages' UTF-8 JSON, when known: no longer than PRECOUNT_CHARS, their text is
    shorter still (a character is at least a byte there), so it is not measured. `known`: counts
    already made this request (by `id`), not made again."""
    def count(m: Message) -> int:
        found = known.get(id(m)) if known else None
        return counter.count_message(strip_private_fields(m)) if found is None else found

    small_text = encoded is not None and len(encoded) < PRECOUNT_CHARS
    if len(messages) < PRECOUNT_MESSAGES and (small_text or _text_chars(messages) < PRECOUNT_CHARS):
        return count
    counts = await asyncio.to_thread(lambda: {id(m): count(m) for m in messages})
    return lambda m: counts[id(m)] if id(m) in counts else count(m)


def _text_chars(messages: list[Message]) -> int:
    total = 0
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            total += sum(len(str(p.get("text", ""))) for p in content if isinstance(p, dict))
    return total


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


def pricing_of(turn: ChatTurn) -> str:
    """Whose cache prices a request's estimates use: Anthropic's for an Anthropic entry, else OpenAI's."""
    return "anthropic" if turn.upstream.provider == "anthropic" else "openai"


def tools_digest(tools: Sequence[Mapping[str, Any]]) -> str:
    """The client's tool schemas, hashed (with their tokens, which tell whether the recall tools were
    added, the key of the schemas sent ahead of the messages)."""
    return hashlib.sha256(dumps_sorted(list(tools))).hexdigest() if tools else ""


def received_tokens(ctx: RequestContext, sent: PreparedRequest) -> tuple[int, ...]:
    """Tokens per message of a request forwarded as received (the stored messages' counts)."""
    stored = ctx.ingest.messages
    return tuple(m.token_count for m in stored) if len(stored) == len(sent.messages) else ()


def prefix_hashes(messages: tuple[Message, ...], known: Mapping[int, bytes | None] | None = None,
                  conversation_id: str | None = None) -> tuple[str, ...]:
    """Running sha256 per forwarded message: equal prefixes give equal leading hashes (memoised per
    message: a resent history's forwarded list is mostly the previous one's, the conversation's last
    one is compared first). `known`: the exact JSON of messages already encoded this request, by
    `id()` (objects the caller keeps alive meanwhile)."""
    keys: list[bytes | None] = list(map((known or {}).get, map(id, messages)))  # in C: no Python pass
    missing = -1
    with contextlib.suppress(ValueError):  # no None left
        while True:  # a summary, the anchor block, a message not plain JSON: encoded here
            missing = keys.index(None, missing + 1)
            keys[missing] = exact_json(messages[missing])
    return tuple(_FORWARDED.over(messages, keys=keys, run=conversation_id))


def _forwarded_step(previous: str, message: Message) -> str:
    # sorted keys, compact, unicode kept (fastjson: json's exact bytes)
    return hashlib.sha256(previous.encode() + dumps_sorted(message)).hexdigest()


_FORWARDED = RunningHashes(_forwarded_step, name="forwarded_hashes")
