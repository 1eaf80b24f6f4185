"""The token budget of one request.

`total = context_window - reserve_for_reply - safety_margin` is the usable input budget; tool
schemas (the client's and the recall tools, when offered) are part of it, so the messages get
`messages = total - tools_tokens`. The threshold (background preparation starts), the preparation
limit (how far prepared summaries reach) and the target (where a step lands, raw messages filling the
rest) are percentages of `total`, the usable input budget (not of the raw window).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import structlog

from compaction.types import ChatTurn
from config.errors import InvalidRequestError
from config.settings import FALLBACK_CONTEXT_WINDOW, CompactionSettings, Settings
from store.models import SummaryKind

log = structlog.get_logger(__name__)

MIN_INPUT_BUDGET = 256  # below this a request cannot carry even its last turn: reject it
# Summary sizes scale with the window: a leaf summary asks at most budget/8, a condensed one budget/5
# (fixed 1,200/2,000-token targets fit a 128k window, not a 12k one), and never more than a third of its input
# (a summary that frees two thirds of its chunk is worth a step; summaries of summaries stay about
# the size of one of their sources and never crowd out raw messages).
LEAF_TARGET_DIVISOR = 8
CONDENSED_TARGET_DIVISOR = 5
INPUT_DIVISOR = 3
MIN_SUMMARY_TARGET = 32
# A leaf chunk is at most this share of the budget (and `leaf_chunk_tokens`): a step substitutes
# whole chunks, so small chunks let it land close to its target instead of far below it.
LEAF_CHUNK_BUDGET_PERCENT = 10
MIN_LEAF_CHUNK_TOKENS = 256

WindowSource = Literal["model_entry", "config", "provider_metadata", "fallback", "turn"]


@dataclass(frozen=True)
class Budget:
    """Token limits for one request; every figure is derived, never guessed by characters."""

    context_window: int
    reserve_tokens: int
    safety_margin: int
    tools_tokens: int
    summarize_percent: int
    target_percent: int
    prepare_percent: int
    fresh_tail_max_percent: int
    anchor_max_percent: int
    window_source: WindowSource = "turn"

    @property
    def total(self) -> int:
        """Usable input budget: window minus reply reserve minus safety margin (tools included)."""
        return self.context_window - self.reserve_tokens - self.safety_margin

    @property
    def messages(self) -> int:
        """What the message list may use once tool schemas are paid for."""
        return self.total - self.tools_tokens

    @property
    def threshold(self) -> int:
        """Above this many input tokens a background compaction step runs."""
        return self.total * self.summarize_percent // 100

    @property
    def target(self) -> int:
        """A step (the view's boundary moving) lands at or below here; then the view stays put."""
        return self.total * self.target_percent // 100

    @property
    def prepare_limit(self) -> int:
        """Background steps prepare summaries until substituting them all would reach this."""
        return self.total * self.prepare_percent // 100

    @property
    def oversized(self) -> int:
        """A message above this (a quarter of the message budget) is oversized: elided in place
        rather than pushing out everything older, when something has to give."""
        return self.messages // 4

    def leaf_chunk_tokens(self, settings: CompactionSettings) -> int:
        """Token cap of a leaf chunk: the configured size, at most a tenth of the budget."""
        scaled = self.total * LEAF_CHUNK_BUDGET_PERCENT // 100
        return max(MIN_LEAF_CHUNK_TOKENS, min(settings.leaf_chunk_tokens, scaled))

    @property
    def fresh_tail_max(self) -> int:
        return self.total * self.fresh_tail_max_percent // 100

    @property
    def anchor_max(self) -> int:
        return self.total * self.anchor_max_percent // 100

    def summary_target(self, settings: CompactionSettings, kind: SummaryKind, input_tokens: int) -> int:
        """Tokens asked of a `kind` summary of `input_tokens`: the configured size scaled to the
        window and at most a third of the input, so a committed summary really shrinks the context."""
        configured, divisor = ((settings.leaf_target_tokens, LEAF_TARGET_DIVISOR) if kind == "leaf"
                               else (settings.condensed_target_tokens, CONDENSED_TARGET_DIVISOR))
        scaled = min(configured, self.total // divisor, input_tokens // INPUT_DIVISOR)
        return max(MIN_SUMMARY_TARGET, scaled)

    def fits(self, tokens: int) -> bool:
        """Whether a request of `tokens` input tokens (tools included) is within budget."""
        return tokens <= self.total

    @classmethod
    def for_turn(cls, turn: ChatTurn, tools_tokens: int, *,
                 window_source: WindowSource = "turn") -> Budget:
        """The budget of `turn`; raises InvalidRequestError when max_tokens/tools leave no room."""
        return cls.compute(turn.settings, turn.context_window, turn.max_reply_tokens, tools_tokens,
                           window_source=window_source)

    @classmethod
    def compute(cls, settings: CompactionSettings, context_window: int, max_reply_tokens: int | None,
                tools_tokens: int, *, window_source: WindowSource = "turn") -> Budget:
        reserve = (max_reply_tokens if max_reply_tokens is not None
                   else min(settings.reserve_tokens, context_window // 4))
        budget = cls(context_window, reserve, settings.safety_margin_tokens, tools_tokens,
                     settings.summarize_token_percent, settings.target_token_percent,
                     settings.prepare_token_percent, settings.fresh_tail_max_percent,
                     settings.anchor_max_percent, window_source)
        _check_room(budget, max_reply_tokens is not None)
        return budget


def _check_room(budget: Budget, reserve_requested: bool) -> None:
    if budget.total <= MIN_INPUT_BUDGET:
        param = "max_tokens" if reserve_requested else "model"
        raise InvalidRequestError(
            f"max_tokens={budget.reserve_tokens} leaves {max(budget.total, 0)} input tokens in the "
            f"{budget.context_window}-token context window (safety margin {budget.safety_margin}); "
            f"lower max_tokens so at least {MIN_INPUT_BUDGET + 1} input tokens remain",
            param=param, code="context_length_exceeded")
    if budget.messages <= MIN_INPUT_BUDGET:
        raise InvalidRequestError(
            f"the tool schemas use {budget.tools_tokens} of the {budget.total} input tokens this "
            f"request may use; send fewer or smaller tools, or lower max_tokens",
            param="tools", code="context_length_exceeded")


def resolve_context_window(settings: Settings, model: str,
                           provider_window: Callable[[str], int | None] | None = None
                           ) -> tuple[int, WindowSource]:
    """Context window for `model` and where it came from.

    Order: the model entry's `context_window` (or its compaction override), the global
    `compaction.context_window`, litellm's provider metadata, then the 50,000 fallback (logged).
    """
    entry = settings.find_model(model)
    if entry is not None and entry.context_window:
        return entry.context_window, "model_entry"
    if entry is not None and entry.compaction.context_window:
        return entry.compaction.context_window, "model_entry"
    if settings.compaction.context_window:
        return settings.compaction.context_window, "config"
    upstream = entry.resolved_params(model).model if entry is not None else model
    lookup = provider_window or _litellm_window
    for name in dict.fromkeys((upstream, model)):
        window = lookup(name)
        if window:
            return window, "provider_metadata"
    log.warning("budget.context_window_fallback", model=model, context_window=FALLBACK_CONTEXT_WINDOW)
    return FALLBACK_CONTEXT_WINDOW, "fallback"


def _litellm_window(model: str) -> int | None:
    from compaction import llm

    return llm.model_context_window(model)
