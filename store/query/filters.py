"""Search parameters, validated and turned into filters alike on every backend.

The pattern is compiled by store/query/pattern.py (never passed raw to the database). Time filters
compare unix `created_at`: `since` inclusive, `before` exclusive; `last` = now - window, with units h
(hours), d (days), w (weeks), m (months of 30 days). Each scope (messages, summaries) ranks only the
CANDIDATES most recent matches passing every filter (store/sqlite/search.py, store/postgres/search.py).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from config.errors import InvalidRequestError
from store.models import SearchQuery
from store.query.pattern import Mode, compile_pattern

MAX_LIMIT = 100
_LAST = re.compile(r"^\s*(\d{1,4})\s*([hdwm])\s*$")
_UNIT_SECONDS = {"h": 3_600, "d": 86_400, "w": 7 * 86_400, "m": 30 * 86_400}
CANDIDATES = 1_000  # per scope: only the most recent matches passing the filters are ranked


@dataclass(frozen=True)
class Filters:
    mode: Mode
    match: str
    since: float | None
    before: float | None
    conversation_id: str | None
    role: str | None
    limit: int


def parse_last(value: str) -> float:
    """Seconds in a relative window like 6h, 7d, 2w, 1m."""
    found = _LAST.match(value)
    if not found or int(found.group(1)) == 0:
        raise InvalidRequestError(f"last must look like 6h, 7d, 2w or 1m, got {value!r}", param="last")
    return int(found.group(1)) * _UNIT_SECONDS[found.group(2)]


def parse_instant(value: str, param: str) -> float:
    """ISO 8601 date or date-time to a unix time; naive values are UTC."""
    try:
        parsed = datetime.fromisoformat(value.strip())
    except (ValueError, AttributeError):
        raise InvalidRequestError(f"{param} must be an ISO 8601 date or date-time, got {value!r}",
                                  param=param) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def parse_filters(q: SearchQuery, now: float) -> Filters:
    """Validate every parameter up front; errors name the parameter."""
    mode, match = compile_pattern(q.pattern)
    if not isinstance(q.limit, int) or not 1 <= q.limit <= MAX_LIMIT:
        raise InvalidRequestError(f"limit must be between 1 and {MAX_LIMIT}", param="limit")
    if q.scope not in ("summary", "message", "both"):
        raise InvalidRequestError("scope must be summary, message or both", param="scope")
    if q.role not in (None, "user", "assistant"):
        raise InvalidRequestError("role must be user or assistant", param="role")
    if q.role is not None and q.scope == "summary":
        raise InvalidRequestError("role filters messages; it cannot be used with scope=summary", param="role")
    since = parse_instant(q.since, "since") if q.since else None
    if q.last:
        window_start = now - parse_last(q.last)
        since = window_start if since is None else max(since, window_start)
    before = parse_instant(q.before, "before") if q.before else None
    if not q.all_conversations and not q.conversation_id:
        raise InvalidRequestError("conversation_id is required unless all_conversations is true",
                                  param="conversation_id")
    conversation = None if q.all_conversations else q.conversation_id
    return Filters(mode, match, since, before, conversation, q.role, q.limit)


def where_clause(f: Filters, alias: str, with_role: bool) -> tuple[str, dict[str, Any]]:
    clauses = [f"{alias}.tenant_id = :tenant"]
    params: dict[str, Any] = {"match": f.match, "limit": f.limit}
    for clause, name, value in ((f"{alias}.conversation_id = :cid", "cid", f.conversation_id),
                                (f"{alias}.created_at >= :since", "since", f.since),
                                (f"{alias}.created_at < :before", "before", f.before),
                                (f"{alias}.role = :role", "role", f.role if with_role else None)):
        if value is not None:
            clauses.append(clause)
            params[name] = value
    return " AND ".join(clauses), params


def validate(q: SearchQuery) -> None:
    """Raise InvalidRequestError for a bad query without touching the database."""
    parse_filters(q, time.time())
