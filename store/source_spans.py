"""A summary of a long run of messages links them as one id span, not one row per message.

A collapsed import (compaction/steps/collapse.py) is one summary of tens of thousands of messages;
writing a `summary_sources` row for each held the store for 0.13-0.24 s at 50,000 messages, while
every other conversation's request waited on it. When a summary's sources are messages only, at
least SPAN_MIN_SOURCES of them, and exactly the conversation's messages whose ids lie between the
first and the last (in id order), one `summary_source_spans` row (first id, last id) stands for
them. That stays exact: a conversation's rows are never deleted but with it, and a row written later
gets a larger id, so no row of the conversation ever enters the span. Readers get the same sources
either way (`span_sources`).
"""

from __future__ import annotations

from collections.abc import Sequence

from store.rows import in_list
from store.runner import Runner
from store.summaries import SourceRef

SPAN_MIN_SOURCES = 1_024  # fewer sources keep their rows (a leaf summary has tens)
_COLUMNS = "summary_id, conversation_id, first_id, last_id"


def as_span(run: Runner, conversation_id: str, message_ids: Sequence[int]) -> tuple[int, int] | None:
    """(first id, last id) when `message_ids` are many, ascending, and exactly the conversation's
    messages with ids in that span; else None (the sources get a row each)."""
    ids = list(message_ids)
    if len(ids) < SPAN_MIN_SOURCES or ids != sorted(set(ids)):
        return None
    count = run("SELECT COUNT(*) FROM messages WHERE tenant_id = :tenant AND conversation_id = :cid "
                "AND id BETWEEN :first AND :last",
                {"cid": conversation_id, "first": ids[0], "last": ids[-1]}).fetchone()[0]
    return (ids[0], ids[-1]) if int(count) == len(ids) else None


def add_span(run: Runner, summary_id: str, conversation_id: str, span: tuple[int, int]) -> None:
    run("INSERT INTO summary_source_spans (summary_id, tenant_id, conversation_id, first_id, last_id) "
        "VALUES (:sid, :tenant, :cid, :first, :last)",
        {"sid": summary_id, "cid": conversation_id, "first": span[0], "last": span[1]})


def span_sources(run: Runner, summary_ids: Sequence[str] = (),
                 conversation_id: str | None = None) -> dict[str, list[SourceRef]]:
    """The sources of the span-linked summaries among `summary_ids` (or all of `conversation_id`'s),
    in order: the conversation's messages with ids in the span."""
    if conversation_id is not None:
        spans = run(f"SELECT {_COLUMNS} FROM summary_source_spans WHERE tenant_id = :tenant "
                    "AND conversation_id = :cid", {"cid": conversation_id}).fetchall()
    elif summary_ids:
        marks, params = in_list("s", list(summary_ids))
        spans = run(f"SELECT {_COLUMNS} FROM summary_source_spans WHERE tenant_id = :tenant "
                    f"AND summary_id IN {marks}", params).fetchall()
    else:
        return {}
    return {str(s[0]): _messages(run, str(s[1]), int(s[2]), int(s[3])) for s in spans}


def _messages(run: Runner, conversation_id: str, first: int, last: int) -> list[SourceRef]:
    found = run("SELECT id FROM messages WHERE tenant_id = :tenant AND conversation_id = :cid "
                "AND id BETWEEN :first AND :last ORDER BY id",
                {"cid": conversation_id, "first": first, "last": last}, plain=True)
    return [("message", str(r[0])) for r in found]
