"""Full-text search over a tenant's messages and summaries (seed 000 `short_grep`).

The pattern is compiled by store/pattern.py (never passed raw to MATCH). Word patterns use the
unicode61 indexes (`*_fts`), substring/CJK patterns the trigram ones (`*_tri`). Each scope is one
query joining the FTS table to its content table with the tenant filter; hits of both scopes are
merged by bm25 rank (more negative = better) and cut to `limit`.
Time filters compare unix `created_at`: `since` inclusive, `before` exclusive; `last` = now - window,
with units h (hours), d (days), w (weeks), m (months of 30 days).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from config.errors import InvalidRequestError
from store.ingest import Runner
from store.models import SearchHit, SearchQuery
from store.pattern import Mode, compile_pattern

MAX_LIMIT = 100
_LAST = re.compile(r"^\s*(\d{1,4})\s*([hdwm])\s*$")
_UNIT_SECONDS = {"h": 3_600, "d": 86_400, "w": 7 * 86_400, "m": 30 * 86_400}
_SNIPPET_TOKENS = {"words": 16, "trigram": 48}  # trigram tokens are characters, not words


@dataclass(frozen=True)
class _Filters:
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


def _filters(q: SearchQuery, now: float) -> _Filters:
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
    return _Filters(mode, match, since, before, conversation, q.role, q.limit)


def _where(f: _Filters, alias: str, with_role: bool) -> tuple[str, dict[str, Any]]:
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


def _message_hits(run: Runner, f: _Filters) -> list[SearchHit]:
    table = "messages_fts" if f.mode == "words" else "messages_tri"
    where, params = _where(f, "m", with_role=True)
    sql = (f"SELECT m.id, m.conversation_id, m.role, m.created_at, bm25({table}) AS rank, "
           f"snippet({table}, 0, '[', ']', '…', {_SNIPPET_TOKENS[f.mode]}) AS snippet "
           f"FROM {table} JOIN messages m ON m.id = {table}.rowid "
           f"WHERE {table} MATCH :match AND {where} ORDER BY rank LIMIT :limit")
    return [SearchHit(kind="message", id=str(r["id"]), conversation_id=r["conversation_id"],
                      rank=r["rank"], snippet=r["snippet"], role=r["role"], created_at=r["created_at"])
            for r in run(sql, params)]


def _summary_hits(run: Runner, f: _Filters) -> list[SearchHit]:
    table = "summaries_fts" if f.mode == "words" else "summaries_tri"
    where, params = _where(f, "s", with_role=False)
    sql = (f"SELECT s.id, s.conversation_id, s.depth, s.created_at, bm25({table}) AS rank, "
           f"snippet({table}, 0, '[', ']', '…', {_SNIPPET_TOKENS[f.mode]}) AS snippet "
           f"FROM {table} JOIN summaries s ON s.num = {table}.rowid "
           f"WHERE {table} MATCH :match AND {where} ORDER BY rank LIMIT :limit")
    return [SearchHit(kind="summary", id=r["id"], conversation_id=r["conversation_id"], rank=r["rank"],
                      snippet=r["snippet"], depth=r["depth"], created_at=r["created_at"])
            for r in run(sql, params)]


def validate(q: SearchQuery) -> None:
    """Raise InvalidRequestError for a bad query without touching the database."""
    _filters(q, time.time())


def search(run: Runner, q: SearchQuery, now: float | None = None) -> list[SearchHit]:
    """Hits of the tenant (conversation-scoped unless all_conversations), best rank first.

    With a role filter, scope `both` searches messages only (summaries have no role).
    """
    f = _filters(q, time.time() if now is None else now)
    hits: list[SearchHit] = []
    if q.scope in ("message", "both"):
        hits += _message_hits(run, f)
    if q.scope in ("summary", "both") and f.role is None:
        hits += _summary_hits(run, f)
    hits.sort(key=lambda h: (h.rank, h.kind, h.id))
    return hits[: f.limit]
