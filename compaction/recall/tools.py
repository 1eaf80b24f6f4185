"""The recall tools offered to the model while its context holds summaries, to reopen what they condense.

`tool_schemas` gives the OpenAI tool definitions, `execute` answers one call with a JSON string
(results, or a JSON error object for bad arguments: it never raises into the model loop).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from compaction.types import PreparedRequest
from config.errors import CtxProxyError, InvalidRequestError
from config.settings import RecallSettings
from store.interface import TenantAccess
from store.models import SearchQuery

MAX_EXPAND_IDS = 20


def tool_schemas(settings: RecallSettings) -> list[dict[str, Any]]:
    """OpenAI `tools` entries for search and expand, named per settings."""
    search = {
        "name": settings.search_tool_name,
        "description": "Search this conversation's full stored history (messages and summaries) that "
                       "was compacted out of your context. Returns ids and snippets with BM25 rank.",
        "parameters": {"type": "object", "properties": {
            "pattern": {"type": "string", "description": "words, AND/OR/NOT, %fuzzy% wildcards"},
            "scope": {"type": "string", "enum": ["summary", "message", "both"]},
            "role": {"type": "string", "enum": ["user", "assistant"]},
            "last": {"type": "string", "description": "relative window: 6h, 7d, 2w, 1m"},
            "since": {"type": "string", "description": "ISO 8601 lower bound"},
            "before": {"type": "string", "description": "ISO 8601 upper bound"},
            "all_conversations": {"type": "boolean"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50}},
            "required": ["pattern"]},
    }
    expand = {
        "name": settings.expand_tool_name,
        "description": "Full text of stored messages or summaries by id (message ids as strings, "
                       "summary ids like sum_...). Tool result payloads are omitted.",
        "parameters": {"type": "object", "properties": {
            "ids": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_EXPAND_IDS}},
            "required": ["ids"]},
    }
    return [{"type": "function", "function": search}, {"type": "function", "function": expand}]


def is_recall_tool(name: str, settings: RecallSettings) -> bool:
    return name in (settings.search_tool_name, settings.expand_tool_name)


def offered_for_request(settings: RecallSettings, *, n: object,
                        client_tools: Sequence[Mapping[str, Any]]) -> bool:
    """Whether this request may carry the recall tools, and so any hint to call them.

    Computed once per request (ChatTurn.offer_recall): the engine renders retrieval hints from it
    and the proxy's tool loop offers the tools from it. Never with recall disabled or no rounds,
    with `n > 1` (one answer loop per turn), or when a client tool already uses one of our names
    (the client's tool wins: its calls must reach the client).
    """
    if not settings.enabled or settings.max_rounds < 1 or n not in (None, 1):
        return False
    names = {fn.get("name") for t in client_tools
             if isinstance(fn := t.get("function"), Mapping)}
    return not names & {settings.search_tool_name, settings.expand_tool_name}


def should_offer(prepared: PreparedRequest, settings: RecallSettings) -> bool:
    """Offer recall when the request allows it and the forwarded context hides something:
    summaries or a truncation (the same decision the engine rendered hints from)."""
    return (settings.enabled and prepared.recall_offered
            and (bool(prepared.summary_ids) or prepared.forced_truncation))


def execute(tenant: TenantAccess, conversation_id: str, name: str, arguments_json: str,
            settings: RecallSettings) -> str:
    """Answer one recall tool call with a JSON string (synchronous: run it where the store lives)."""
    try:
        args = json.loads(arguments_json or "{}")
        if not isinstance(args, dict):
            raise InvalidRequestError("arguments must be a JSON object", param="arguments")
        if name == settings.search_tool_name:
            return _search(tenant, conversation_id, args, settings)
        if name == settings.expand_tool_name:
            return _expand(tenant, args)
        return _error(f"unknown tool {name!r}")
    except (ValueError, TypeError) as exc:  # bad JSON (json.loads) or argument types from the model
        return _error(str(exc))
    except CtxProxyError as exc:
        return _error(exc.message)


def _search(tenant: TenantAccess, cid: str, args: dict[str, Any], settings: RecallSettings) -> str:
    pattern = args.get("pattern")
    if not isinstance(pattern, str) or not pattern.strip():
        raise InvalidRequestError("pattern: a non-empty string is required", param="pattern")
    limit = args.get("limit", settings.search_limit)
    if not isinstance(limit, int) or not 1 <= limit <= 50:
        raise InvalidRequestError("limit: an integer between 1 and 50", param="limit")
    query = SearchQuery(pattern=pattern, scope=args.get("scope") or "both", role=args.get("role"),
                        last=args.get("last"), since=args.get("since"), before=args.get("before"),
                        conversation_id=cid, all_conversations=bool(args.get("all_conversations")),
                        limit=limit)
    hits = tenant.search(query)
    return json.dumps({"hits": [{k: v for k, v in h.__dict__.items() if v is not None} for h in hits]},
                      ensure_ascii=False)


def _expand(tenant: TenantAccess, args: dict[str, Any]) -> str:
    ids = args.get("ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str | int) for i in ids):
        raise InvalidRequestError("ids: a non-empty list of id strings is required", param="ids")
    items = tenant.expand([str(i) for i in ids[:MAX_EXPAND_IDS]])
    return json.dumps({"items": [{k: v for k, v in i.__dict__.items() if v not in (None, ())}
                                 for i in items]}, ensure_ascii=False)


def _error(message: str) -> str:
    return json.dumps({"error": message}, ensure_ascii=False)
