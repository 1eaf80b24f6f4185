"""Full-text search over a tenant's messages and summaries: the search recall tool.

The pattern is compiled by store/pattern.py (never passed raw to MATCH). Word patterns use the
unicode61 indexes (`*_fts`), substring/CJK patterns the trigram ones (`*_tri`).

Ranking is bounded: each scope (messages, summaries) ranks by BM25 only the CANDIDATES (1,000) most
recent matches that pass every filter (tenant, conversation, role, time), "most recent" meaning last
stored (highest rowid). With fewer matches than that, results are exactly the full BM25 ranking; with
more, older matches are not considered, so ranking work is bounded however common the term (finding
the candidates still walks matches newest first until N pass the filters). Scores are the BM25
values a full ranking gives (IDF over the whole index). Each scope is one query: candidates (read
newest first, stopping at N), ranked, and only the top `limit` rows joined to the content table
(tenant checked again); hits of both scopes are merged by rank (more negative = better), cut to `limit`.
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
SNIPPET_TOKENS = {"words": 16, "trigram": 48}  # trigram tokens are characters, not words
CANDIDATES = 1_000  # per scope: only the most recent matches passing the filters are ranked


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


def _hex_token(prefix: str, value: str) -> str:
    """A scope token as the FTS triggers write it: prefix + SQLite hex() of the UTF-8 value."""
    return prefix + value.encode().hex().upper()


def _scope_tokens(f: _Filters, tenant_id: str, with_role: bool) -> str:
    """The unicode61 index's scope tokens for this search: conversation (else tenant), and role."""
    scope = [_hex_token("c", f.conversation_id) if f.conversation_id else _hex_token("t", tenant_id)]
    if with_role and f.role:
        scope.append(_hex_token("r", f.role))
    return " AND ".join(f'scope : "{token}"' for token in scope)


def _scoped_match(f: _Filters, tenant_id: str, column: str, with_role: bool) -> str:
    """Restrict the user expression to the text column and AND the scope tokens (words mode only)."""
    if f.mode != "words":
        return f.match
    return f"{column} : ({f.match}) AND {_scope_tokens(f, tenant_id, with_role)}"


def _rank_match(f: _Filters, column: str) -> str:
    """The expression bm25 scores: the user's alone, so IDF is never computed over a scope token.

    The scope tokens sit in a column weighted 0, so dropping them leaves every score unchanged.
    """
    return f"{column} : ({f.match})" if f.mode == "words" else f.match


def _candidates_sql(f: _Filters, table: str, content: str, key: str, where: str) -> str:
    """Rowids of the CANDIDATES most recent matches passing every filter, newest first.

    FTS5 walks the doclist in descending rowid order and stops at the limit (no sort). Words mode
    carries the scope in the match; a conversation-scoped trigram search keeps only rowids of the
    conversation's (and role's) scope doclist in the unicode61 index. Only what those cannot decide
    (time bounds; the tenant of a tenant-wide trigram search) joins the content table, row by row.
    """
    scope = ""
    if f.mode == "trigram" and f.conversation_id:
        words = table.replace("_tri", "_fts")
        scope = f" AND +{table}.rowid IN (SELECT rowid FROM {words} WHERE {words} MATCH :scope)"
    if f.since is None and f.before is None and (f.mode == "words" or f.conversation_id):
        return (f"SELECT rowid AS rid FROM {table} WHERE {table} MATCH :scoped{scope} "
                f"ORDER BY rowid DESC LIMIT :n")
    return (f"SELECT {table}.rowid AS rid FROM {table} CROSS JOIN {content} ON {key} = {table}.rowid "
            f"WHERE {table} MATCH :scoped{scope} AND {where} ORDER BY {table}.rowid DESC LIMIT :n")


def _ranked_sql(f: _Filters, table: str, rank: str, content: str, key: str, columns: str, where: str) -> str:
    """Top hits by bm25 among the candidates; only those `limit` rows are joined to the content table.

    The ranking pass re-runs the match inside the candidates' rowid range and keeps the candidates
    (`+rowid`: a plain `rowid IN` would make FTS5 re-run the match once per listed rowid).
    """
    snippet = f"snippet({table}, 0, '[', ']', '…', {SNIPPET_TOKENS[f.mode]})"
    return (f"WITH cand AS MATERIALIZED ({_candidates_sql(f, table, content, key, where)}) "
            f"SELECT {columns}, hit.rank AS rank, hit.snippet AS snippet FROM (SELECT rowid AS rid, "
            f"{rank} AS rank, {snippet} AS snippet FROM {table} WHERE {table} MATCH :match "
            f"AND rowid >= (SELECT min(rid) FROM cand) AND rowid <= (SELECT max(rid) FROM cand) "
            f"AND +rowid IN cand ORDER BY rank LIMIT :limit) AS hit "
            f"CROSS JOIN {content} ON {key} = hit.rid WHERE {where} ORDER BY hit.rank")


def _params(f: _Filters, tenant_id: str, column: str, with_role: bool,
            params: dict[str, Any]) -> dict[str, Any]:
    """Bind both expressions and the candidate bound (read at call time so tests can lower it)."""
    return {**params, "scoped": _scoped_match(f, tenant_id, column, with_role),
            "scope": _scope_tokens(f, tenant_id, with_role), "match": _rank_match(f, column),
            "n": CANDIDATES}


def _message_hits(run: Runner, f: _Filters, tenant_id: str) -> list[SearchHit]:
    table = "messages_fts" if f.mode == "words" else "messages_tri"
    where, params = _where(f, "m", with_role=True)
    rank = f"bm25({table}, 1.0, 0.0)" if f.mode == "words" else f"bm25({table})"
    sql = _ranked_sql(f, table, rank, "messages m", "m.id", "m.id, m.conversation_id, m.role, m.created_at",
                      where)
    return [SearchHit(kind="message", id=str(r["id"]), conversation_id=r["conversation_id"],
                      rank=r["rank"], snippet=r["snippet"], role=r["role"], created_at=r["created_at"])
            for r in run(sql, _params(f, tenant_id, "text", True, params))]


def _summary_hits(run: Runner, f: _Filters, tenant_id: str) -> list[SearchHit]:
    table = "summaries_fts" if f.mode == "words" else "summaries_tri"
    where, params = _where(f, "s", with_role=False)
    rank = f"bm25({table}, 1.0, 0.0)" if f.mode == "words" else f"bm25({table})"
    sql = _ranked_sql(f, table, rank, "summaries s", "s.num",
                      "s.id, s.conversation_id, s.depth, s.created_at", where)
    return [SearchHit(kind="summary", id=r["id"], conversation_id=r["conversation_id"], rank=r["rank"],
                      snippet=r["snippet"], depth=r["depth"], created_at=r["created_at"])
            for r in run(sql, _params(f, tenant_id, "content", False, params))]


# The PostgreSQL store (store/postgres/search.py) shares validation and filters.
Filters = _Filters
parse_filters = _filters
where_clause = _where


def validate(q: SearchQuery) -> None:
    """Raise InvalidRequestError for a bad query without touching the database."""
    _filters(q, time.time())


def search(run: Runner, tenant_id: str, q: SearchQuery, now: float | None = None) -> list[SearchHit]:
    """Hits of the tenant (conversation-scoped unless all_conversations), best rank first.

    Ranks the CANDIDATES most recent filtered matches of each scope by BM25 (see the module doc).
    With a role filter, scope `both` searches messages only (summaries have no role).
    """
    f = _filters(q, time.time() if now is None else now)
    hits: list[SearchHit] = []
    if q.scope in ("message", "both"):
        hits += _message_hits(run, f, tenant_id)
    if q.scope in ("summary", "both") and f.role is None:
        hits += _summary_hits(run, f, tenant_id)
    hits.sort(key=lambda h: (h.rank, h.kind, h.id))
    return hits[: f.limit]
