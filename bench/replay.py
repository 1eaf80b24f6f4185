"""Replay a recorded conversation through a baseline strategy, checked exactly like ctxproxy's.

The engine replay itself lives in the product (`replay.run`, behind `ctxproxy replay`); the
baselines are eval tooling only.
"""

from __future__ import annotations

from collections.abc import Sequence

from compaction.budget import Budget
from compaction.tokens import TokenCounter
from replay.baselines import Strategy
from replay.checks import CachedCounter, RequestCheck, check_request
from replay.records import RecordedConversation
from replay.report import ConversationReport, finish_report
from replay.run import Message, ProgressHook, ReplayOptions, select_points


def budget_for(options: ReplayOptions, tools: Sequence[Message], counter: TokenCounter) -> Budget:
    """The same budget the engine computes for these settings (no max_tokens in replayed requests)."""
    return Budget.compute(options.compaction, options.window, None, counter.count_tools(list(tools)))


def replay_baseline(conv: RecordedConversation, name: str, strategy: Strategy,
                    options: ReplayOptions, progress: ProgressHook | None = None) -> ConversationReport:
    """Every request of `conv` through a baseline strategy, checked like ctxproxy's."""
    counter = CachedCounter(TokenCounter.for_model(options.model))
    budget = budget_for(options, conv.tools, counter.counter)
    points = select_points(conv, options, options.stride)
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
    return finish_report(conv, name, options.model, requests, previous or [])
