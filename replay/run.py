"""Replay a recorded conversation request by request through the real engine (`ctxproxy replay`).

A request is sent wherever the recording has an assistant message right after a user or tool
message: the client sends everything before it, and the recorded assistant message is the reply.
The run uses a real Store in a temporary directory, the model's own tokenizer and window, and a
real summarizer (`local/extractive` by default), exactly as the proxy would; no network.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from compaction import (
    ChatTurn,
    Engine,
    Message,
    PreparedRequest,
    Summarizer,
    SummarizerChoice,
    TokenCounter,
    recall,
)
from config.errors import CtxProxyError
from config.settings import (
    LOCAL_EXTRACTIVE,
    CompactionSettings,
    LiteLLMParams,
    RecallSettings,
    Settings,
    default_model_list,
)
from replay.checks import CachedCounter, RequestCheck, check_request
from replay.records import RecordedConversation
from replay.report import ConversationReport, TurnStats, finish_report
from replay.summarizers import CountingSummarizer, summarizer_named
from store.factory import open_store
from store.interface import TenantAccess
from store.models import CompactionEvent, SummaryRecord

ProgressHook = Callable[[int, int], None]  # (requests done, requests total)


def rejected(event: CompactionEvent) -> bool:
    """A step that refused a summary: rejected outright, failed verification, or committed at a later
    level after an earlier one was refused (its `rejected_facts` say why)."""
    return event.verification == "failed" or event.outcome == "rejected" or bool(event.rejected_facts)


@dataclass(frozen=True)
class ObservedRequest:
    """One replayed request as an evaluation sees it: what was forwarded, the compaction steps of
    this request and of the background work after it, and the summaries stored when it was planned."""

    point: int  # the request is messages[:point]; messages[point] is its recorded reply
    forwarded: tuple[Message, ...]
    check: RequestCheck
    events: tuple[CompactionEvent, ...] = ()
    summaries: tuple[SummaryRecord, ...] = ()  # engine runs: the store's summaries after `prepare`
    request_calls: int = 0  # summarizer calls the request itself waited on (not background ones)


RequestObserver = Callable[[ObservedRequest], None]

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_WINDOW = 12_000
REPLAY_TENANT = "bench"  # the throw-away store's only tenant


@dataclass(frozen=True)
class ReplayOptions:
    """How to replay: which model's tokenizer and price, which window, which summarizer."""

    model: str = DEFAULT_MODEL
    window: int = DEFAULT_WINDOW
    summarizer: str = LOCAL_EXTRACTIVE  # or a model name, served by LiteLLMSummarizer
    background: bool = False  # True: do not drain background compaction between turns (--async)
    compaction: CompactionSettings = field(default_factory=CompactionSettings)
    max_requests: int | None = None  # stop early (smoke runs)
    stride: int = 1  # baselines only: check every n-th request (and the last); slow strategies


def request_points(messages: Sequence[Message]) -> list[int]:
    """Indexes k where messages[:k] is a request and messages[k] its recorded reply."""
    return [k for k in range(1, len(messages))
            if messages[k].get("role") == "assistant"
            and messages[k - 1].get("role") in ("user", "tool")]


def select_points(conv: RecordedConversation, options: ReplayOptions, stride: int = 1) -> list[int]:
    """The request points to replay: the first `max_requests`, every `stride`-th one and the last."""
    points = request_points(conv.messages)
    points = points[:options.max_requests] if options.max_requests else points
    if stride > 1 and points:
        points = sorted(set(points[stride - 1::stride]) | {points[-1]})
    return points


@dataclass
class _EngineRun:
    """One conversation's engine, store and counters for the duration of a replay."""

    conv: RecordedConversation
    options: ReplayOptions
    engine: Engine
    tenant: TenantAccess
    summarizer: CountingSummarizer
    counter: CachedCounter
    recall: RecallSettings
    observer: RequestObserver | None = None
    events_seen: int = 0

    def turn(self, k: int) -> ChatTurn:
        o = self.options
        offer = recall.offered_for_request(self.recall, n=None, client_tools=self.conv.tools)
        return ChatTurn(tenant_id=REPLAY_TENANT, model=o.model, upstream=LiteLLMParams(f"openai/{o.model}"),
                        settings=o.compaction, context_window=o.window,
                        messages=tuple(self.conv.messages[:k]), tools=tuple(self.conv.tools),
                        offer_recall=offer)

    def forwarded_tools(self, prepared: PreparedRequest) -> list[dict[str, Any]]:
        """The tools the proxy would send: the client's, plus recall tools when it offers them."""
        extra = recall.tool_schemas(self.recall) if recall.should_offer(prepared, self.recall) else []
        return list(self.conv.tools) + extra

    def new_events(self, conversation_id: str) -> list[CompactionEvent]:
        events = self.tenant.events(conversation_id)
        fresh, self.events_seen = events[self.events_seen:], len(events)
        return fresh

    async def step(self, k: int, previous: Sequence[Message] | None
                   ) -> tuple[PreparedRequest, RequestCheck, TurnStats]:
        """One request: prepare, store the recorded reply, schedule (and maybe drain) compaction."""
        turn = self.turn(k)
        calls_before = self.summarizer.calls
        prepared = await self.engine.prepare(turn)
        request_calls = self.summarizer.calls - calls_before
        cid = prepared.conversation_id
        summaries = tuple(self.tenant.summaries(cid)) if self.observer is not None else ()
        self.engine.record_reply(prepared, turn, dict(self.conv.messages[k]))
        self.engine.after_turn(prepared, turn)
        if self.options.background:
            await asyncio.sleep(0)  # let background compaction interleave, like a live proxy
        else:
            await self.engine.background.drain()
        sent, forwarded = list(turn.messages), list(prepared.messages)
        check = check_request(sent, forwarded, budget=prepared.budget, counter=self.counter,
                              tools=self.forwarded_tools(prepared), previous=previous,
                              checks=self.conv.checks)
        events = self.new_events(cid)
        if self.observer is not None:
            self.observer(ObservedRequest(k, tuple(forwarded), check, tuple(events), summaries,
                                          request_calls))
        stats = TurnStats(prepared.occupancy.as_dict(), prepared.compacted, prepared.summary_ids,
                          prepared.waited_on_summarizer, prepared.forced_truncation,
                          prepared.prefix_stable, self.summarizer.calls - calls_before,
                          sum(rejected(e) for e in events),
                          len(self.tenant.anchors(cid)))
        return prepared, check, stats



def engine_settings(base: Settings | None, store_path: str, options: ReplayOptions) -> Settings:
    """`base` (or the defaults) with the replay's compaction settings and a throw-away store."""
    base = base or Settings(model_list=default_model_list())
    return replace(base, compaction=options.compaction,
                   store=replace(base.store, path=store_path, tenant_secret="bench-secret"))


async def replay_engine(conv: RecordedConversation, options: ReplayOptions, *,
                        summarizer: Summarizer | None = None, settings: Settings | None = None,
                        strategy: str = "ctxproxy", progress: ProgressHook | None = None,
                        observer: RequestObserver | None = None) -> ConversationReport:
    """Every request of `conv` through the real Engine with a fresh store in a temp directory;
    `observer` sees each forwarded request as it is made."""
    with tempfile.TemporaryDirectory(prefix="ctxproxy-replay-") as tmp:
        full = engine_settings(settings, str(Path(tmp) / "replay.db"), options)
        counting = CountingSummarizer(summarizer or summarizer_named(options.summarizer, full))
        store = open_store(full.store)
        engine = Engine(store, full, lambda turn: SummarizerChoice(counting, {"model": counting.name}))
        run = _EngineRun(conv, options, engine, store.for_tenant(REPLAY_TENANT), counting,
                         CachedCounter(TokenCounter.for_model(options.model)), full.recall, observer)
        try:
            return await _replay_all(run, strategy, progress)
        finally:
            await engine.aclose()
            store.close()


async def _replay_all(run: _EngineRun, strategy: str, progress: ProgressHook | None
                      ) -> ConversationReport:
    points = select_points(run.conv, run.options)
    requests: list[RequestCheck] = []
    turns: list[TurnStats] = []
    previous: list[Message] | None = None
    errors: list[str] = []
    for done, k in enumerate(points, 1):
        try:
            prepared, check, stats = await run.step(k, previous)
        except CtxProxyError as exc:  # what the client would get instead of an answer: reported
            errors.append(f"request {k}: {exc.code}: {exc.message}")
            continue
        finally:
            if progress:
                progress(done, len(points))
        requests.append(check)
        turns.append(stats)
        previous = list(prepared.messages)
    await run.engine.background.drain()
    return finish_report(run.conv, strategy, run.options.model, requests, previous or [],
                         turns=tuple(turns), summarizer_calls=run.summarizer.calls, errors=tuple(errors))
