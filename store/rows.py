"""Turning database rows into the records of store/models.py (and records into row values)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from store.models import (
    Anchor,
    CompactionEvent,
    ContextView,
    Conversation,
    ForwardedRecord,
    Message,
    StoredMessage,
    SummaryRecord,
    ViewItem,
)
from store.summaries import Sources


def in_list(name: str, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """Placeholders and parameters for `IN (...)`: ("(:name0, :name1)", {"name0": .., "name1": ..}).

    Values are always bound, never inlined. Callers skip the query when `values` is empty.
    """
    params = {f"{name}{i}": v for i, v in enumerate(values)}
    return "(" + ", ".join(f":{key}" for key in params) + ")", params


def dumps(value: Any) -> str:
    """Compact JSON, unicode kept (lossless round trip for message objects)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def conversation(row: sqlite3.Row) -> Conversation:
    return Conversation(id=row["id"], tenant_id=row["tenant_id"], model=row["model"],
                        external_id=row["external_id"], forked_from=row["forked_from"],
                        message_count=row["message_count"], created_at=row["created_at"],
                        updated_at=row["updated_at"])


def message(row: sqlite3.Row, body: Message | None = None) -> StoredMessage:
    """`body` replaces the stored JSON when the caller already holds an equivalent message."""
    return StoredMessage(id=row["id"], conversation_id=row["conversation_id"], seq=row["seq"],
                         role=row["role"],
                         message=body if body is not None else json.loads(row["message_json"]),
                         token_count=row["token_count"], chain_hash=row["chain_hash"],
                         content_hash=row["content_hash"], pinned=bool(row["pinned"]),
                         source=row["source"], created_at=row["created_at"])


def summary(row: sqlite3.Row, sources: Sources) -> SummaryRecord:
    """`sources`: the summary's message ids and summary ids, in order (store/summaries.py)."""
    return SummaryRecord(
        id=row["id"], conversation_id=row["conversation_id"], kind=row["kind"], depth=row["depth"],
        generation=row["generation"], level=row["level"], content=row["content"],
        token_count=row["token_count"], first_seq=row["first_seq"], last_seq=row["last_seq"],
        source_message_ids=sources[0], source_summary_ids=sources[1],
        model=row["model"], prompt_version=row["prompt_version"], created_at=row["created_at"])


def anchor(row: sqlite3.Row) -> Anchor:
    return Anchor(id=row["id"], conversation_id=row["conversation_id"], kind=row["kind"], key=row["key"],
                  value=row["value"], source_message_id=row["source_message_id"], status=row["status"],
                  superseded_by=row["superseded_by"], created_at=row["created_at"])


def view(row: sqlite3.Row) -> ContextView:
    items = tuple(ViewItem(kind, ref) for kind, ref in json.loads(row["items_json"]))
    return ContextView(conversation_id=row["conversation_id"], version=row["version"], items=items,
                       covered_through_seq=row["covered_through_seq"],
                       anchor_ids=tuple(json.loads(row["anchor_ids_json"])), created_at=row["created_at"])


_EVENT_JSON = ("summarizer_settings", "source_message_ids", "source_summary_ids", "rejected_facts",
               "anchors_added", "anchors_superseded")
_EVENT_PLAIN = ("conversation_id", "trigger", "tier", "level", "outcome", "summarizer_model",
                "prompt_version", "summary_id", "depth", "generation", "tokens_before", "tokens_after",
                "verification", "duration_ms", "error")


def event_values(event: CompactionEvent) -> dict[str, Any]:
    """Column values for one compaction event (tuples and dicts as JSON)."""
    values = {name: getattr(event, name) for name in _EVENT_PLAIN}
    values.update({f"{name}_json": dumps(getattr(event, name)) for name in _EVENT_JSON})
    return values


def event(row: sqlite3.Row) -> CompactionEvent:
    fields: dict[str, Any] = {name: row[name] for name in _EVENT_PLAIN}
    for name in _EVENT_JSON:
        value = json.loads(row[f"{name}_json"])
        fields[name] = value if name == "summarizer_settings" else tuple(value)
    return CompactionEvent(id=row["id"], created_at=row["created_at"], **fields)


def forwarded(row: sqlite3.Row) -> ForwardedRecord:
    extends = row["extends_previous"]
    return ForwardedRecord(conversation_id=row["conversation_id"], prefix_hashes=(),
                           tokens_received=row["tokens_received"], tokens_forwarded=row["tokens_forwarded"],
                           budget=row["budget"], occupancy=json.loads(row["occupancy_json"]),
                           compacted=bool(row["compacted"]), view_version=row["view_version"],
                           messages_forwarded=row["messages_forwarded"], shared_prefix=row["shared_prefix"],
                           extends_previous=None if extends is None else bool(extends),
                           prefix_tokens=row["prefix_tokens"], full_prefix_tokens=row["full_prefix_tokens"],
                           billed_input_estimate=row["billed_input_estimate"],
                           full_history_billed_estimate=row["full_history_billed_estimate"],
                           cache_read_tokens=row["cache_read_tokens"])
