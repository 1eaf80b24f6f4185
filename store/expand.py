"""Expand ids back to full content (messages; summaries with their sources): the expand recall tool.

Decimal ids are messages: full text, tool calls as {type: 'tool_call', id, name, arguments}, media
URIs as {type: 'media', ...}. Tool results are omitted on purpose (they can be huge; re-run the tool).
`sum_...` ids are summaries: content, depth and direct sources (message ids or summary ids).
Unknown ids and other tenants' ids raise the same NotFoundError.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from config.errors import InvalidRequestError, NotFoundError
from store.encoding.content import TOOL_RESULT_NOTE, content_text, media_parts, tool_calls
from store.rows import in_list
from store.runner import Runner
from store.source_spans import span_sources

MAX_EXPAND_IDS = 50


def _message_item(row: Any) -> dict[str, Any]:
    message = json.loads(row["message_json"])
    base = {"kind": "message", "id": str(row["id"]), "conversation_id": row["conversation_id"],
            "role": row["role"]}
    if row["role"] in ("tool", "function"):
        return {**base, "text": "", "parts": (), "note": TOOL_RESULT_NOTE}
    text = content_text(message)
    calls = [{"type": "tool_call", **call} for call in tool_calls(message)]
    lines = [text] + [f"[tool call {c['name']}] {c['arguments'] or ''}" for c in calls]
    parts = ([{"type": "text", "text": text}] if text else []) + calls + media_parts(message)
    return {**base, "text": "\n".join(x for x in lines if x), "parts": tuple(parts)}


def _load_messages(run: Runner, ids: list[int]) -> dict[str, dict[str, Any]]:
    if not ids:
        return {}
    marks, params = in_list("m", ids)
    found = run("SELECT id, conversation_id, role, message_json FROM messages "
                f"WHERE tenant_id = :tenant AND id IN {marks}", params)
    return {str(r["id"]): _message_item(r) for r in found}


def _load_summaries(run: Runner, ids: list[str]) -> dict[str, dict[str, Any]]:
    if not ids:
        return {}
    marks, params = in_list("s", ids)
    found = run("SELECT id, conversation_id, depth, content FROM summaries "
                f"WHERE tenant_id = :tenant AND id IN {marks}", params).fetchall()
    sources: dict[str, list[str]] = {r["id"]: [] for r in found}
    for r in run("SELECT summary_id, source_id FROM summary_sources WHERE tenant_id = :tenant "
                 f"AND summary_id IN {marks} ORDER BY summary_id, ord", params):
        sources[r["summary_id"]].append(r["source_id"])
    for sid, refs in span_sources(run, [sid for sid, linked in sources.items() if not linked]).items():
        sources[sid] = [source_id for _, source_id in refs]
    return {r["id"]: {"kind": "summary", "id": r["id"], "conversation_id": r["conversation_id"],
                      "role": None, "text": r["content"], "depth": r["depth"],
                      "sources": tuple(sources[r["id"]])} for r in found}


def classify(ids: Sequence[str]) -> tuple[list[int], list[str]]:
    """Split ids into message ids and summary ids; anything else is unknown (NotFoundError)."""
    if len(ids) > MAX_EXPAND_IDS:
        raise InvalidRequestError(f"at most {MAX_EXPAND_IDS} ids per expand call, got {len(ids)}",
                                  param="ids")
    messages: list[int] = []
    summaries: list[str] = []
    for raw in ids:
        text = str(raw).strip()
        if text.isdecimal() and text.isascii() and len(text) <= 18:
            messages.append(int(text))
        elif text.startswith("sum_") and len(text) <= 40:
            summaries.append(text)
        else:
            raise NotFoundError(f"no message or summary with id {raw!r}", param="ids")
    return messages, summaries


def expand_rows(run: Runner, ids: Sequence[str]) -> list[dict[str, Any]]:
    """Field dicts for ExpandedItem, in the order asked."""
    message_ids, summary_ids = classify(ids)
    found = {**_load_messages(run, message_ids), **_load_summaries(run, summary_ids)}
    out = []
    for raw in ids:
        key = str(raw).strip()
        key = str(int(key)) if key.isdecimal() and key.isascii() else key
        if key not in found:
            raise NotFoundError(f"no message or summary with id {raw!r}", param="ids")
        out.append(found[key])
    return out
