"""Search and expand for operators and clients: request parsing and result shapes.

Shared by the HTTP routes (proxy/routes/context.py) and the CLI (proxy/cli/recall.py), so both
faces accept the same parameters and print the same JSON. The store does the searching
(`TenantAccess.search` / `expand`, tenant-scoped) and validates values (pattern syntax, windows,
dates, limit); this module checks JSON types and names the offending `param`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, cast

from config.errors import InvalidRequestError
from store.interface import TenantAccess
from store.models import ExpandedItem, SearchHit, SearchQuery

SEARCH_STRINGS = ("pattern", "scope", "role", "last", "since", "before", "conversation_id")


def _bad(param: str, message: str) -> InvalidRequestError:
    return InvalidRequestError(message, param=param)


def search_query(body: Mapping[str, Any]) -> SearchQuery:
    """A SearchQuery from a JSON object; unknown keys and wrong types are 400s naming the key."""
    unknown = sorted(set(body) - {*SEARCH_STRINGS, "all_conversations", "limit"})
    if unknown:
        raise _bad(unknown[0], f"unknown parameter {unknown[0]!r}")
    fields: dict[str, Any] = {}
    for key in SEARCH_STRINGS:
        value = body.get(key)
        if value is not None and not isinstance(value, str):
            raise _bad(key, f"{key} must be a string")
        if value is not None:
            fields[key] = value
    if "pattern" not in fields:
        raise _bad("pattern", "pattern is required")
    everywhere = body.get("all_conversations", False)
    if not isinstance(everywhere, bool):
        raise _bad("all_conversations", "all_conversations must be a boolean")
    if everywhere and fields.get("conversation_id"):
        raise _bad("all_conversations", "give conversation_id or all_conversations, not both")
    limit = body.get("limit", SearchQuery.limit)
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise _bad("limit", "limit must be an integer")
    return SearchQuery(all_conversations=everywhere, limit=limit, **fields)


def run_search(store: TenantAccess, q: SearchQuery) -> list[SearchHit]:
    """The store's search; with no conversation named, the tenant's most recently active one."""
    if not q.all_conversations and not q.conversation_id:
        latest = store.list_conversations(limit=1)
        # No conversation at all: still validate the query, over the (empty) whole tenant.
        q = (dataclasses.replace(q, conversation_id=latest[0].id) if latest
             else dataclasses.replace(q, all_conversations=True))
    return store.search(q)


def expand_ids(body: Mapping[str, Any]) -> list[str]:
    """The `ids` of an expand request: a non-empty list of strings (or integer message ids)."""
    unknown = sorted(set(body) - {"ids"})
    if unknown:
        raise _bad(unknown[0], f"unknown parameter {unknown[0]!r}")
    ids = body.get("ids")
    if not isinstance(ids, list) or not ids:
        raise _bad("ids", "ids must be a non-empty list of message or summary ids")
    out: list[str] = []
    for i, raw in enumerate(ids):
        if isinstance(raw, bool) or not isinstance(raw, str | int):
            raise _bad(f"ids[{i}]", "each id must be a string (or an integer message id)")
        out.append(str(raw))
    return out


def hit_json(hit: SearchHit) -> dict[str, Any]:
    """One search hit as the API and `--json` show it."""
    return {"object": "context.search_hit", **dataclasses.asdict(hit)}


def item_json(item: ExpandedItem) -> dict[str, Any]:
    """One expanded message or summary as the API and `--json` show it."""
    return {"object": "context.item", **cast(dict[str, Any], _listify(dataclasses.asdict(item)))}


def _listify(value: Any) -> Any:
    """Tuples (frozen dataclass fields) as JSON lists, recursively."""
    if isinstance(value, dict):
        return {k: _listify(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_listify(v) for v in value]
    return value


def as_list(data: list[dict[str, Any]]) -> dict[str, Any]:
    """OpenAI's list envelope."""
    return {"object": "list", "data": data}
