"""The store's contract: what compaction/, replay/ and proxy/ may call, whatever the backend.

`store.sqlite.store.Store` (SQLite, the embedded default) and `store.postgres.store.PgStore` implement
the same two Protocols, so nothing above store/ depends on a backend. Every `TenantAccess` method reads or
writes only its own tenant's rows: another tenant's ids behave exactly like nonexistent ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal, Protocol

from config.errors import StoreError
from store.history.ingest import Ahead
from store.models import (
    Anchor,
    AnchorDraft,
    CompactionEvent,
    ContextView,
    Conversation,
    ExpandedItem,
    ForwardedRecord,
    IngestResult,
    Message,
    SearchHit,
    SearchQuery,
    StoredMessage,
    SummaryDraft,
    SummaryRecord,
)

# Builds a pass's view and event from its committed summary and anchors (added, superseded); a None
# view leaves the conversation's view as it is (a summary prepared ahead, not yet in the view).
PassFinisher = Callable[[SummaryRecord, list[Anchor], list[Anchor]],
                        tuple[ContextView | None, CompactionEvent]]


class TenantAccess(Protocol):
    """Everything one tenant may read or write (conversations, messages, summaries, recall)."""

    @property
    def tenant_id(self) -> str: ...

    def ingest(self, messages: Sequence[Message], *, model: str, external_id: str | None,
               count_tokens: Callable[[Message], int],
               keys: Sequence[bytes | None] | None = None) -> IngestResult: ...

    def read_ahead(self, messages: Sequence[Message], *, external_id: str | None,
                   keys: Sequence[bytes | None] | None = None) -> Ahead: ...

    def ingest_slices(self, messages: Sequence[Message], *, model: str, external_id: str | None,
                      count_tokens: Callable[[Message], int], keys: Sequence[bytes | None] | None = None,
                      size: int, ahead: Ahead | None = None) -> Iterator[IngestResult | None]: ...

    def append_reply(self, conversation_id: str, message: Message, token_count: int, *,
                     parent_seq: int, parent_chain: str | None = None) -> StoredMessage: ...

    def conversation(self, conversation_id: str) -> Conversation: ...

    def list_conversations(self, limit: int = 50) -> list[Conversation]: ...

    def messages(self, conversation_id: str, *, start_seq: int = 0,
                 end_seq: int | None = None) -> list[StoredMessage]: ...

    def message(self, message_id: int) -> StoredMessage: ...

    # Data lifecycle: each deletes conversations with everything they own (messages, summaries and
    # their sources, anchors, views, events, forwarded log, tool rounds, search index entries) and
    # leaves none of their text in the store's files once the WAL is emptied.
    def delete_conversation(self, conversation_id: str) -> None: ...

    def delete_tenant(self) -> int: ...  # every conversation of the tenant; returns how many

    def delete_idle(self, before: float) -> int: ...  # last active before `before` (epoch s)

    def add_summary(self, draft: SummaryDraft) -> SummaryRecord: ...

    def summary(self, summary_id: str) -> SummaryRecord: ...

    def summaries(self, conversation_id: str) -> list[SummaryRecord]: ...

    def view(self, conversation_id: str) -> ContextView | None: ...

    def save_view(self, view: ContextView) -> ContextView: ...

    def commit_pass(self, draft: SummaryDraft, anchor_drafts: Sequence[AnchorDraft],
                    finish: PassFinisher) -> tuple[SummaryRecord, ContextView | None, CompactionEvent]: ...

    def anchors(self, conversation_id: str, *, include_superseded: bool = False) -> list[Anchor]: ...

    def upsert_anchors(self, conversation_id: str,
                       drafts: Sequence[AnchorDraft]) -> tuple[list[Anchor], list[Anchor]]: ...

    def preview_anchors(self, conversation_id: str, drafts: Sequence[AnchorDraft]) -> list[Anchor]: ...

    def record_event(self, event: CompactionEvent) -> CompactionEvent: ...

    def events(self, conversation_id: str) -> list[CompactionEvent]: ...

    def record_forwarded(self, rec: ForwardedRecord) -> bool | None: ...

    def record_forwarded_cost(self, rec: ForwardedRecord) -> ForwardedRecord: ...

    def note_cache_read(self, conversation_id: str, tokens: int) -> None: ...

    def forwarded(self, conversation_id: str) -> list[ForwardedRecord]: ...

    def record_tool_round(self, conversation_id: str, calls: list[dict[str, Any]],
                          results: list[Message]) -> None: ...

    def tool_rounds(self, conversation_id: str) -> list[dict[str, Any]]: ...

    def claim_step(self, conversation_id: str, holder: str, lease_s: float) -> bool: ...

    def release_step(self, conversation_id: str, holder: str) -> None: ...

    # Provider objects (a file, a response, a batch, ...) this tenant created through an operator's key.
    def record_objects(self, kind: str, object_ids: Sequence[str]) -> None: ...

    def owned_objects(self, object_ids: Sequence[str]) -> set[str]: ...  # those of `object_ids` it owns

    def forget_objects(self, object_ids: Sequence[str]) -> None: ...

    def search(self, q: SearchQuery) -> list[SearchHit]: ...

    def expand(self, ids: Sequence[str]) -> list[ExpandedItem]: ...


class StoreBackend(Protocol):
    """One open store: tenant identity, tenant-scoped access, operator views, upkeep."""

    def tenant_id_for_key(self, api_key: str | None) -> str: ...

    def for_tenant(self, tenant_id: str) -> TenantAccess: ...

    def tenant_ids(self) -> list[str]: ...

    # Fold the WAL into the database; TRUNCATE also empties the WAL file. True when complete.
    # `exclusive`: this process's writers wait for it (it cannot be starved). A no-op elsewhere.
    def checkpoint(self, mode: Literal["PASSIVE", "TRUNCATE"] = "PASSIVE", *,
                   exclusive: bool = False) -> bool: ...

    # Index for search up to `limit` messages a bulk import stored unindexed, oldest first; how many.
    def index_pending(self, limit: int) -> int: ...

    def size_bytes(self) -> int: ...

    def close(self) -> None: ...


def refuse_newer_schema(done: set[int], known_versions: Iterable[int]) -> None:
    """Every backend, on opening: a database written by a newer ctxproxy is never opened (this code
    cannot know its schema). `done`: the versions the database records; `known_versions`: this code's."""
    known = max(known_versions, default=0)
    if done and max(done) > known:
        raise StoreError(f"the store's schema is version {max(done)}, newer than this ctxproxy "
                         f"understands (schema version {known}); upgrade ctxproxy, or point "
                         "store.path at another database", code="store_schema_too_new")
