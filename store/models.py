"""Records the store persists and hands back. Plain frozen dataclasses, no I/O.

These are the shapes shared by store/ (which writes them), compaction/ (which decides with them) and
proxy/ (which reports them). Ids: messages are integers (shown to people and models as decimal
strings), summaries are strings `sum_<12 hex>`, anchors are integers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypeVar

# One chat message: an OpenAI chat-completions message object (role, content, tool_calls, ...) kept as
# the parsed JSON the client sent, so nothing in it is lost. Every package uses this one name.
Message = dict[str, Any]
Role = Literal["system", "developer", "user", "assistant", "tool", "function"]
MessageSource = Literal["client", "reply"]
SummaryKind = Literal["leaf", "condensed"]
# normal/aggressive: the LLM summarizer's prompts; extractive: the local one; truncation: whole messages
# kept, the rest behind one pointer line; elision (events only): request-time cuts in place.
SummaryLevel = Literal["normal", "aggressive", "truncation", "extractive", "elision"]
ViewItemKind = Literal["message", "summary"]
Verification = Literal["passed", "failed", "not_run"]
T = TypeVar("T")


def assembled(cls: type[T], values: dict[str, Any]) -> T:
    """An instance of the frozen dataclass `cls` from every one of its field values, without its
    `__init__` (which sets each field through object.__setattr__: ~2 µs a record, and a resent
    history builds thousands per request). Only for plain frozen dataclasses (no slots, no
    __post_init__); tests/store/test_assembled.py checks each class it serves."""
    obj: T = object.__new__(cls)
    obj.__dict__.update(values)
    return obj


def field_names(cls: type[Any]) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


@dataclass(frozen=True)
class StoredMessage:
    """One message of a conversation, exactly as the client sent it (or as the provider replied)."""

    id: int
    conversation_id: str
    seq: int  # 0-based position in the conversation
    role: str
    message: Message  # lossless original JSON object, minus ctxproxy's own `pinned` field
    token_count: int  # counted once with the conversation model's tokenizer, framing included
    chain_hash: str  # hash over (previous chain_hash, normalised message): conversation identity
    content_hash: str  # hash of the normalised message alone
    pinned: bool = False
    source: MessageSource = "client"
    created_at: float = 0.0

    @property
    def tool_call_ids(self) -> tuple[str, ...]:
        """Ids of the tool calls an assistant message makes (empty otherwise)."""
        calls = self.message.get("tool_calls") or []
        return tuple(str(c.get("id")) for c in calls if isinstance(c, dict))


@dataclass(frozen=True)
class Conversation:
    id: str
    tenant_id: str
    model: str
    external_id: str | None  # X-Conversation-Id, when the client sent one
    forked_from: str | None  # conversation this one diverged from (edited history)
    message_count: int
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class IngestResult:
    """What storing one request's messages produced."""

    conversation: Conversation
    messages: tuple[StoredMessage, ...]  # the request's full history, in order, as stored
    new_count: int  # how many of them were written by this call (0 on a pure resend)
    forked: bool  # the history diverged from a stored one and started a new conversation
    revised: bool = False  # the client rebuilt the history; the conversation was revised in place


@dataclass(frozen=True)
class SummaryRecord:
    id: str  # sum_<12 hex>
    conversation_id: str
    kind: SummaryKind
    depth: int  # 0 = leaf (sources are messages), n+1 = condenses depth-n summaries
    generation: int  # how many compaction steps of this conversation preceded it (1-based)
    level: SummaryLevel  # escalation level that produced the committed text
    content: str
    token_count: int
    first_seq: int  # message range covered, inclusive
    last_seq: int
    source_message_ids: tuple[int, ...]  # direct sources when kind == "leaf"
    source_summary_ids: tuple[str, ...]  # direct sources when kind == "condensed"
    model: str  # summarizer model that wrote it (`local/extractive`, `local/truncation`, ...)
    prompt_version: str
    created_at: float = 0.0


@dataclass(frozen=True)
class SummaryDraft:
    """A verified summary about to be committed; the store assigns id, generation and time."""

    conversation_id: str
    kind: SummaryKind
    depth: int
    level: SummaryLevel
    content: str
    token_count: int
    first_seq: int
    last_seq: int
    source_message_ids: tuple[int, ...] = ()
    source_summary_ids: tuple[str, ...] = ()
    model: str = ""
    prompt_version: str = ""


@dataclass(frozen=True)
class Anchor:
    """A concrete fact that travels raw in the anchor block."""

    id: int
    conversation_id: str
    kind: str  # id | order | ticket | amount | date | name | path | url | email | decision | pinned
    key: str  # what the value is about ("order number", "budget"); same key+kind => supersedes
    value: str  # verbatim text from the source
    source_message_id: int | None
    status: Literal["active", "superseded"] = "active"
    superseded_by: int | None = None
    created_at: float = 0.0


@dataclass(frozen=True)
class AnchorDraft:
    kind: str
    key: str
    value: str
    source_message_id: int | None
    source_seq: int = -1  # position of the source message, to order corrections


@dataclass(frozen=True)
class ViewItem:
    """One entry of a persisted compacted view: a stored summary or a raw message by seq."""

    kind: ViewItemKind
    ref: str  # summary id, or the message seq as a decimal string


@dataclass(frozen=True)
class ContextView:
    """The compacted working view of a conversation, persisted so prefixes stay stable.

    Items cover messages `0..covered_through_seq`; newer messages are appended raw when a request
    is planned. `version` increases at each compaction step.
    """

    conversation_id: str
    version: int
    items: tuple[ViewItem, ...]
    covered_through_seq: int
    anchor_ids: tuple[int, ...] = ()  # anchor block content at this version (stability)
    created_at: float = 0.0


@dataclass(frozen=True)
class CompactionEvent:
    """Provenance of one compaction pass (or of a request's truncation): enough to trace and reproduce it."""

    conversation_id: str
    trigger: Literal["threshold", "hard_budget", "manual"]  # why the step holding this pass ran
    tier: Literal["leaf", "condensed", "truncation"]  # the kind compacted (stored and labelled `tier`)
    level: SummaryLevel
    outcome: Literal["committed", "rejected", "failed", "skipped"]
    summarizer_model: str
    summarizer_settings: dict[str, Any] = field(default_factory=dict)
    prompt_version: str = ""
    source_message_ids: tuple[int, ...] = ()
    source_summary_ids: tuple[str, ...] = ()
    summary_id: str | None = None
    depth: int | None = None
    generation: int | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    verification: Verification = "not_run"
    rejected_facts: tuple[str, ...] = ()
    anchors_added: tuple[int, ...] = ()
    anchors_superseded: tuple[int, ...] = ()
    duration_ms: float = 0.0
    error: str | None = None
    id: int | None = None
    created_at: float = 0.0


@dataclass(frozen=True)
class ForwardedRecord:
    """What one forwarded request looked like, for prefix-stability and occupancy reporting."""

    conversation_id: str
    # Running hash per forwarded message: given when recording, compared with the previous request,
    # not kept (records read back carry an empty tuple and the comparison's results below).
    prefix_hashes: tuple[str, ...]
    tokens_received: int
    tokens_forwarded: int
    budget: int
    occupancy: dict[str, int]  # tokens by category: system, anchors, summaries, fresh_tail, tools, free
    compacted: bool
    view_version: int
    messages_forwarded: int = 0  # set by the store when recording
    shared_prefix: int = 0  # leading messages in common with the previous forwarded request
    extends_previous: bool | None = None  # the previous request is a prefix of this one (None: first)
    # Given when recording, not kept: each forwarded message's tokens, the received history's running
    # hashes and tokens (compared with the previous request's received history), and whose prices
    # the estimates use ("anthropic" or "openai": store/encoding/billing.py).
    message_tokens: tuple[int, ...] = ()
    received_hashes: tuple[str, ...] = ()
    received_tokens: tuple[int, ...] = ()
    pricing: str = "openai"
    # The tool schemas ahead of the messages (a change there shares nothing): a key of what was
    # forwarded and of what was received, and their tokens.
    tools_key: str = ""
    tools_tokens: int = 0
    received_tools_key: str = ""
    received_tools_tokens: int = 0
    # Set by the store when recording: tokens of the leading messages shared with the previous
    # forwarded request (and of the received history with the previous received one), and the
    # billed-input estimates of what was forwarded and of sending the whole received history.
    prefix_tokens: int = 0
    full_prefix_tokens: int = 0
    billed_input_estimate: int = 0
    full_history_billed_estimate: int = 0
    cache_read_tokens: int | None = None  # the provider's reported cache reads, noted after the reply


@dataclass(frozen=True)
class SearchQuery:
    pattern: str
    scope: Literal["summary", "message", "both"] = "both"
    role: Literal["user", "assistant"] | None = None
    last: str | None = None  # 6h, 7d, 2w, 1m
    since: str | None = None  # ISO 8601
    before: str | None = None  # ISO 8601
    conversation_id: str | None = None  # required unless all_conversations
    all_conversations: bool = False
    limit: int = 20


@dataclass(frozen=True)
class SearchHit:
    kind: Literal["message", "summary"]
    id: str
    conversation_id: str
    rank: float  # FTS5 bm25: more negative = better
    snippet: str
    role: str | None = None  # messages
    depth: int | None = None  # summaries
    created_at: float = 0.0


@dataclass(frozen=True)
class ExpandedItem:
    kind: Literal["message", "summary"]
    id: str
    conversation_id: str
    role: str | None
    text: str  # full text; tool-call arguments included; tool results replaced by a note
    parts: tuple[dict[str, Any], ...] = ()  # structured parts: text, tool_call, media URIs
    sources: tuple[str, ...] = ()  # a summary's direct sources (message ids or summary ids)
    depth: int | None = None
    note: str | None = None  # e.g. why a tool result payload is omitted
