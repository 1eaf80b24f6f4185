"""Replay a recorded conversation request by request, through the real engine or a baseline.

A request is sent wherever the recording has an assistant message right after a user or tool
message: the client sends everything before it, and the recorded assistant message is the reply.
The engine run uses a real Store in a temporary directory, the model's own tokenizer and window, and
a real summariser (`local/extractive` by default), exactly as the proxy would; no network.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import structlog  # noqa: E402

from bench.baselines import Strategy  # noqa: E402
from bench.checks import (  # noqa: E402
    CachedCounter,
    RequestCheck,
    check_facts,
    check_request,
    invented_facts,
)
from bench.fake_summarizers import CountingSummarizer  # noqa: E402
from bench.generator import GeneratedConversation  # noqa: E402
from bench.report import ConversationReport, TurnStats  # noqa: E402
from compaction import llm, recall  # noqa: E402
from compaction.budget import Budget  # noqa: E402
from compaction.engine import Engine  # noqa: E402
from compaction.summarizers import ExtractiveSummarizer, LiteLLMSummarizer  # noqa: E402
from compaction.tokens import TokenCounter  # noqa: E402
from compaction.types import ChatTurn, PreparedRequest, Summarizer, SummarizerChoice  # noqa: E402
from config.settings import (  # noqa: E402
    LOCAL_EXTRACTIVE,
    CompactionSettings,
    LiteLLMParams,
    RecallSettings,
    Settings,
    default_model_list,
)
from store.models import CompactionEvent  # noqa: E402
from store.store import Store, TenantStore  # noqa: E402

Message = dict[str, Any]
ProgressHook = Callable[[int, int], None]  # (requests done, requests total)

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_WINDOW = 12_000


@dataclass(frozen=True)
class ReplayOptions:
    """How to replay: which model's tokenizer and price, which window, which summariser."""

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


def budget_for(options: ReplayOptions, tools: Sequence[Message], counter: TokenCounter) -> Budget:
    """The same budget the engine computes for these settings (no max_tokens in replayed requests)."""
    return Budget.compute(options.compaction, options.window, None, counter.count_tools(list(tools)))


def prompt_cost(model: str, tokens: Sequence[int]) -> float | None:
    """Estimated input cost of requests of `tokens` prompt tokens each (litellm's local price map)."""
    total = 0.0
    for count in tokens:
        cost = llm.estimate_cost(model, count, 0)
        if cost is None:
            return None
        total += cost
    return total


def _points(conv: GeneratedConversation, options: ReplayOptions, stride: int = 1) -> list[int]:
    points = request_points(conv.messages)
    points = points[:options.max_requests] if options.max_requests else points
    if stride > 1 and points:
        points = sorted(set(points[stride - 1::stride]) | {points[-1]})
    return points


def finish_report(conv: GeneratedConversation, strategy: str, options: ReplayOptions,
                  requests: list[RequestCheck], final: Sequence[Message], **extra: Any
                  ) -> ConversationReport:
    """Conversation-end checks over the last forwarded request, and cost estimates."""
    history = list(conv.messages)
    report = ConversationReport(
        conversation_id=conv.id, strategy=strategy, requests=tuple(requests),
        facts=tuple(check_facts(final, history, conv.checks)),
        invented=tuple(invented_facts(final, history)),
        cost_usd=prompt_cost(options.model, [r.tokens_forwarded for r in requests]),
        cost_passthrough_usd=prompt_cost(options.model, [r.tokens_received for r in requests]))
    return replace(report, **extra) if extra else report


def replay_baseline(conv: GeneratedConversation, name: str, strategy: Strategy,
                    options: ReplayOptions, progress: ProgressHook | None = None) -> ConversationReport:
    """Every request of `conv` through a baseline strategy, checked like ctxproxy's."""
    counter = CachedCounter(TokenCounter.for_model(options.model))
    budget = budget_for(options, conv.tools, counter.counter)
    points = _points(conv, options, options.stride)
    requests: list[RequestCheck] = []
    previous: list[Message] | None = None
    for done, k in enumerate(points, 1):
        sent = list(conv.messages[:k])
        forwarded = strategy(sent, budget.messages, counter)
        requests.append(check_request(sent, forwarded, budget=budget.total, counter=counter,
                                      tools=conv.tools, checks=conv.checks,
                                      previous=previous if options.stride == 1 else None))
        previous = forwarded
        if progress:
            progress(done, len(points))
    return finish_report(conv, name, options, requests, previous or [])


# ------------------------------------------------------------------------------------ real engine

def quiet_logs() -> None:
    """Engine logs go to stderr, errors only: replay output (tables, --json) stays clean."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR),
                        logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    # litellm's trim_messages logs a traceback each time it fails on a content-less tool_calls
    # message (and then returns the history untrimmed); the checks measure that, the log is noise.
    for name in ("LiteLLM", "litellm"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def summarizer_named(name: str, settings: Settings) -> Summarizer:
    """`local/extractive`, a configured model_list name, or any litellm model (settings.summarizer
    supplies api_base/api_key for the latter)."""
    if name == LOCAL_EXTRACTIVE:
        return ExtractiveSummarizer()
    entry = settings.find_model(name)
    s = settings.summarizer
    if entry is not None:
        p = entry.resolved_params(name)
        return LiteLLMSummarizer(p.model, api_base=p.api_base, api_key=p.api_key,
                                 timeout_s=s.timeout_s, temperature=s.temperature, extra=dict(p.extra))
    return LiteLLMSummarizer(name, api_base=s.api_base, api_key=s.api_key, timeout_s=s.timeout_s,
                             temperature=s.temperature, extra=dict(s.extra))


@dataclass
class _EngineRun:
    """One conversation's engine, store and counters for the duration of a replay."""

    conv: GeneratedConversation
    options: ReplayOptions
    engine: Engine
    tenant: TenantStore
    summarizer: CountingSummarizer
    counter: CachedCounter
    recall: RecallSettings
    events_seen: int = 0

    def turn(self, k: int) -> ChatTurn:
        o = self.options
        offer = recall.offered_for_request(self.recall, n=None, client_tools=self.conv.tools)
        return ChatTurn(tenant_id=BENCH_TENANT, model=o.model, upstream=LiteLLMParams(f"openai/{o.model}"),
                        settings=o.compaction, context_window=o.window,
                        messages=tuple(self.conv.messages[:k]), tools=tuple(self.conv.tools),
                        offer_recall=offer)

    def forwarded_tools(self, prepared: PreparedRequest) -> list[Message]:
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
        events = self.new_events(prepared.conversation_id)
        stats = TurnStats(prepared.occupancy.as_dict(), prepared.compacted, prepared.summary_ids,
                          prepared.waited_on_summarizer, prepared.forced_truncation,
                          prepared.prefix_stable, self.summarizer.calls - calls_before,
                          sum(e.verification == "failed" or e.outcome == "rejected" for e in events),
                          len(self.tenant.anchors(prepared.conversation_id)))
        return prepared, check, stats


BENCH_TENANT = "bench"


def engine_settings(base: Settings | None, store_path: str, options: ReplayOptions) -> Settings:
    base = base or Settings(model_list=default_model_list())
    return replace(base, compaction=options.compaction,
                   store=replace(base.store, path=store_path, tenant_secret="bench-secret"))


async def replay_engine(conv: GeneratedConversation, options: ReplayOptions, *,
                        summarizer: Summarizer | None = None, settings: Settings | None = None,
                        strategy: str = "ctxproxy", progress: ProgressHook | None = None
                        ) -> ConversationReport:
    """Every request of `conv` through the real Engine with a fresh store in a temp directory."""
    with tempfile.TemporaryDirectory(prefix="ctxproxy-replay-") as tmp:
        full = engine_settings(settings, str(Path(tmp) / "replay.db"), options)
        counting = CountingSummarizer(summarizer or summarizer_named(options.summarizer, full))
        store = Store.open(full.store)
        engine = Engine(store, full, lambda turn: SummarizerChoice(counting, {"model": counting.name}))
        run = _EngineRun(conv, options, engine, store.for_tenant(BENCH_TENANT), counting,
                         CachedCounter(TokenCounter.for_model(options.model)), full.recall)
        try:
            return await _replay_all(run, strategy, progress)
        finally:
            await engine.aclose()
            store.close()


async def _replay_all(run: _EngineRun, strategy: str, progress: ProgressHook | None
                      ) -> ConversationReport:
    points = _points(run.conv, run.options)
    requests: list[RequestCheck] = []
    turns: list[TurnStats] = []
    previous: list[Message] | None = None
    for done, k in enumerate(points, 1):
        prepared, check, stats = await run.step(k, previous)
        requests.append(check)
        turns.append(stats)
        previous = list(prepared.messages)
        if progress:
            progress(done, len(points))
    await run.engine.background.drain()
    return finish_report(run.conv, strategy, run.options, requests, previous or [],
                         turns=tuple(turns), summarizer_calls=run.summarizer.calls)
