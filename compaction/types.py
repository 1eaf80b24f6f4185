"""Shapes crossing the boundary between proxy/ and the compaction engine, and the summarizer seam."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from config.settings import CompactionSettings, LiteLLMParams
from store.models import CompactionEvent
from store.models import Message as Message  # re-exported: the one message type

PromptLevel = Literal["normal", "aggressive"]  # the two LLM summarizer prompts, tried in this order
CircuitState = Literal["closed", "half_open", "open"]
# How far into the view a step may compact: before_tail leaves the fresh tail raw; into_tail lets the
# tail shrink to the newest group (the last user message stays raw at both).
Reach = Literal["before_tail", "into_tail"]
LevelRejection = Literal["error", "timeout", "deadline", "empty", "not_shorter", "too_long", "unverified"]


@dataclass(frozen=True)
class Credentials:
    """The client's key for this request. Lives in memory only; never stored, never logged."""

    api_key: str | None

    def __repr__(self) -> str:  # keep keys out of tracebacks and debug output
        return "Credentials(api_key=<redacted>)"


@dataclass(frozen=True)
class ChatTurn:
    """One incoming chat request as the engine's input (validated by compaction.messages); the proxy
    keeps it as `Turn.turn` (proxy/server/turn.py) and the engine answers it with a PreparedRequest."""

    tenant_id: str
    model: str  # what the client asked for
    upstream: LiteLLMParams  # resolved model entry params
    settings: CompactionSettings  # global settings merged with the model entry's overrides
    context_window: int
    messages: tuple[Message, ...]  # as received (may carry `pinned`)
    tools: tuple[dict[str, Any], ...] = ()
    max_reply_tokens: int | None = None  # max_tokens / max_completion_tokens
    external_conversation_id: str | None = None  # X-Conversation-Id
    credentials: Credentials = field(default_factory=lambda: Credentials(None))
    # The recall tools may be offered with this request (compaction.recall.tools.offered_for_request, set
    # by the proxy). The one decision behind both the retrieval hints and the proxy's tool loop.
    offer_recall: bool = False


@dataclass(frozen=True)
class Occupancy:
    """Tokens of the forwarded request by category."""

    system: int = 0
    anchors: int = 0
    summaries: int = 0
    fresh_tail: int = 0  # raw messages
    tools: int = 0
    budget: int = 0

    @property
    def used(self) -> int:
        return self.system + self.anchors + self.summaries + self.fresh_tail + self.tools

    @property
    def free(self) -> int:
        return max(0, self.budget - self.used)

    @property
    def unused_ratio(self) -> float:
        """Share of the input budget the request leaves unused (a defect, not headroom: context withheld)."""
        return round(self.free / self.budget, 4) if self.budget > 0 else 0.0

    def as_dict(self) -> dict[str, int]:
        return {"system": self.system, "anchors": self.anchors, "summaries": self.summaries,
                "fresh_tail": self.fresh_tail, "tools": self.tools, "free": self.free,
                "budget": self.budget}


@dataclass(frozen=True)
class PreparedRequest:
    """The engine's answer to one ChatTurn: what the proxy forwards, plus what it reports about it."""

    conversation_id: str
    messages: tuple[Message, ...]  # the forwarded list: validated, within budget, `pinned` stripped
    tools: tuple[dict[str, Any], ...]  # the client's tools (recall tools are added by the proxy)
    tokens_received: int  # the client's full request, counted
    tokens_forwarded: int
    budget: int
    compacted: bool  # summaries, anchors or truncation replaced part of the history
    summary_ids: tuple[str, ...]  # summaries present in the forwarded context
    occupancy: Occupancy
    waited_on_summarizer: bool  # this turn ran a synchronous summarizer call (hard budget)
    forced_truncation: bool
    prefix_stable: bool | None  # extends the previous forwarded request (None: first turn)
    events: tuple[CompactionEvent, ...] = ()  # synchronous compaction steps of this turn
    recall_offered: bool = False  # the turn's offer_recall: hints were rendered for the recall tools
    # The request's last stored message (seq and chain hash): the reply answers it (a regenerated
    # reply branches there instead of following an older reply).
    last_seq: int | None = None
    last_chain_hash: str | None = None
    # `messages` as one compact JSON list when known (a request forwarded as received: the client's
    # own encoding), so the upstream body is not encoded again; not part of equality.
    messages_json: bytes | None = field(default=None, compare=False, repr=False)
    # What it costs, recorded with it: tokens of the leading messages shared with the previous
    # forwarded request, and billed-input estimates of it and of sending the whole received history.
    prefix_tokens: int = field(default=0, compare=False)
    billed_input_estimate: int = field(default=0, compare=False)
    full_history_billed_estimate: int = field(default=0, compare=False)

    @property
    def budget_unused_ratio(self) -> float:
        """Share of the input budget this request leaves unused (logged, measured, recorded)."""
        return self.occupancy.unused_ratio


@dataclass(frozen=True)
class SummaryRequest:
    """One call to a summarizer: the prompt and how the text should come back."""

    system_prompt: str
    user_prompt: str
    target_tokens: int
    prompt_version: str
    level: PromptLevel


class Summarizer(Protocol):
    """The `complete(prompt, options)` seam: litellm, local extractive, or a test fake."""

    @property
    def name(self) -> str: ...

    async def complete(self, request: SummaryRequest) -> str: ...


@dataclass(frozen=True)
class SummarizerChoice:
    """Which summarizer a conversation uses, resolved per request (may need the client's key)."""

    summarizer: Summarizer
    settings: dict[str, Any] = field(default_factory=dict)  # model, temperature, ... for provenance
