"""Replay a recorded conversation through a baseline strategy, checked exactly like ctxproxy's.

The engine replay lives in replay/run.py (`ctxproxy replay`); baselines get the same request points,
the same budget the engine computes, the same checks and the same per-request observer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from compaction import Budget, Message, TokenCounter
from replay.baselines import Strategy
from replay.checks import CachedCounter, RequestCheck, check_request
from replay.records import RecordedConversation
from replay.report import ConversationReport, finish_report
from replay.run import ObservedRequest, ProgressHook, ReplayOptions, RequestObserver, select_points


def budget_for(options: ReplayOptions, tools: Sequence[Mapping[str, Any]], counter: TokenCounter) -> Budget:
    """The budget the engine computes for these settings (no max_tokens in replayed requests)."""
    return Budget.compute(options.compaction, options.window, None, counter.count_tools(list(tools)))


def replay_baseline(conv: RecordedConversation, name: str, strategy: Strategy, options: ReplayOptions,
                    progress: ProgressHook | None = None, observer: RequestObserver | None = None
                    ) -> ConversationReport:
    """Every request of `conv` through a baseline strategy, checked like ctxproxy's."""
    counter = CachedCounter(TokenCounter.for_model(options.model))
    budget = budget_for(options, conv.tools, counter.counter)
    points = select_points(conv, options, options.stride)
    requests: list[RequestCheck] = []
    previous: list[Message] | None = None
    for done, k in enumerate(points, 1):
        sent = list(conv.messages[:k])
        forwarded = strategy(sent, budget.messages, counter)
        check = check_request(sent, forwarded, budget=budget.total, counter=counter, tools=conv.tools,
                              checks=conv.checks, previous=previous if options.stride == 1 else None)
        requests.append(check)
        if observer is not None:
            observer(ObservedRequest(k, tuple(forwarded), check))
        previous = forwarded
        if progress:
            progress(done, len(points))
    return finish_report(conv, name, options.model, requests, previous or [])
