"""Compact once at 95 %: what Claude Code and Codex do when their context fills up.

The system prompt and the task (the system and user messages before the agent's first reply) are
kept verbatim; when the request would
reach 95 % of the budget, everything after the task except the newest whole tool rounds within a
quarter of the budget (at least the newest round) is replaced by ONE summary (the previous summary
included in its sources), made by the same summarizer the ctxproxy run uses; then the agent appends
until 95 % again. Between compactions the forwarded request only grows, so the provider's cache of
the previous request is reused whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compaction import (
    SYSTEM_ROLES,
    ExtractiveSummarizer,
    Message,
    TokenCounter,
    bound_text,
    build_request,
    group_messages,
    redact,
)
from replay.baselines import Counts
from store.encoding.content import message_text

TRIGGER_PERCENT = 95
KEEP_DIVISOR = 4  # the newest quarter of the budget stays raw
SUMMARY_DIVISOR = 8  # the summary asks for at most an eighth of the budget (the engine's leaf target)
SUMMARY_INTRO = ("This session is being continued from a previous conversation that ran out of context. "
                 "The conversation is summarized below:\n")


def task_end(history: Sequence[Message]) -> int:
    """Index after the head kept verbatim: the system prompt and the task, i.e. every system and user
    message before the first other one (Codex sends its environment context, then the task)."""
    for i, message in enumerate(history):
        if message.get("role") not in SYSTEM_ROLES and message.get("role") != "user":
            return i
    return len(history)


def source_text(messages: Sequence[Message], first: int, previous_summary: str | None) -> str:
    """The summarizer's input, rendered as the engine renders its sources (tool results bounded,
    secrets redacted), the previous summary first."""
    blocks = [f"[summary of messages before #{first}]\n{previous_summary}"] if previous_summary else []
    for i, m in enumerate(messages, first):
        text = message_text(m)
        text = bound_text(text, str(i)) if m.get("role") == "tool" else text
        blocks.append(f"[#{i} {m.get('role')}]\n{text}")
    return redact("\n\n".join(blocks))


@dataclass
class CompactOnce:
    """A stateful strategy over one conversation's growing history (call it request by request)."""

    budget: int  # the message budget (tool schemas already paid for)
    counter: Counts
    text_counter: TokenCounter
    summarizer: ExtractiveSummarizer
    covered: int = 0  # history[head:covered] is replaced by the summary
    summary: str | None = None
    summarizer_tokens: int = 0
    compactions: int = 0

    def view(self, history: Sequence[Message]) -> list[Message]:
        head = task_end(history)
        rest = list(history[max(head, self.covered):])
        summary = [] if self.summary is None else [{"role": "user", "content": SUMMARY_INTRO + self.summary}]
        return [dict(m) for m in history[:head]] + summary + [dict(m) for m in rest]

    def __call__(self, history: Sequence[Message], budget: int, counter: Counts) -> list[Message]:
        forwarded = self.view(history)
        if counter.count_messages(forwarded) * 100 < self.budget * TRIGGER_PERCENT:
            return forwarded
        start = max(task_end(history), self.covered)
        keep = self._tail_start(history, start)
        if keep > start:
            self._compact(history, start, keep)
        return self.view(history)

    def _tail_start(self, history: Sequence[Message], start: int) -> int:
        """Start of the newest whole groups of history[start:] within a quarter of the budget."""
        rest = history[start:]
        used, first = 0, len(history)
        for group in reversed(group_messages(rest)):
            cost = sum(self.counter.count_message(m) for m in rest[group.start:group.end])
            if used + cost > self.budget // KEEP_DIVISOR and first < len(history):
                break
            used += cost
            first = start + group.start
        return first

    def _compact(self, history: Sequence[Message], start: int, keep: int) -> None:
        target = self.budget // SUMMARY_DIVISOR
        source = source_text(history[start:keep], start, self.summary)
        request = build_request("leaf", "normal", source, "", target)
        text = self.summarizer.summarize(source, target)
        self.summarizer_tokens += (self.text_counter.count_text(request.system_prompt)
                                   + self.text_counter.count_text(request.user_prompt)
                                   + self.text_counter.count_text(text))
        self.summary, self.covered = text, keep
        self.compactions += 1
