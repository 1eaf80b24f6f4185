"""Full-text search over a tenant's messages and summaries: the search recall tool.

The pattern is compiled by store/query/pattern.py (never passed raw to MATCH). Word patterns use the
unicode61 indexes (`*_fts`), substring/CJK patterns the trigram ones (`*_tri`).

Ranking is bounded: each scope (messages, summaries) ranks by BM25 only the CANDIDATES (1,000) most
recent matches that pass every filter (tenant, conversation, role, time), "most recent" meaning last
stored (highest rowid). With fewer matches than that, results are exactly the full BM25 ranking; with
more, older matches are not considered, so ranking work is bounded however common the term (finding
the candidates still walks matches newest first until N pass the filters). Scores are the BM25
values a full ranking gives (IDF over the whole index). Each scope is one query: candidates (read
newest first, stopping at N), ranked, and only the top `limit` rows joined to the content table
(tenant checked again); hits of both scopes are merged by rank (more negative = better), cut to `limit`.
Parameters are validated and turned into filters by store/query/filters.py, as on PostgreSQL.
"""

from __future__ import annotations

import time
from typing import Any

from store.models import SearchHit, SearchQuery
from store.query import filters
from store.query.filters import Filters, parse_filters, where_clause
from store.query.snippet import SNIPPET_TOKENS
from store.runner import Runner


def _hex_token(prefix: str, value: str) -> str:
    """A scope token as the FTS triggers write it: prefix + SQLite hex() of the UTF-8 value."""
    return prefix + value.encode().hex().upper()


def _scope_tokens(f: Filters, tenant_id: str, with_role: bool) -> str:
    """The unicode61 index's scope tokens for this search: conversation (else tenant), and role."""
    scope = [_hex_token("c", f.conversation_id) if f.conversation_id else _hex_token("t", tenant_id)]
    if with_role and f.role:
        scope.append(_hex_token("r", f.role))
    return " AND ".join(f'scope : "{token}"' for token in scope)


def _scoped_match(f: Filters, tenant_id: str, column: str, with_role: bool) -> str:
    """Restrict the user expression to the text column and AND the scope tokens (words mode only)."""
    if f.mode != "words":
        return f.match
    return f"{column} : ({f.match}) AND {_scope_tokens(f, tenant_id, with_role)}"


def _rank_match(f: Filters, column: str) -> str:
    """The expression bm25 scores: the user's alone, so IDF is never computed over a scope token.

    The scope tokens sit in a column weighted 0, so dropping them leaves every score unchanged.
    """
    return f"{column} : ({f.match})" if f.mode == "words" else f.match


def _candidates_sql(f: Filters, table: str, content: str, key: str, where: str) -> str:
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


def _ranked_sql(f: Filters, table: str, rank: str, content: str, key: str, columns: str, where: str) -> str:
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


def _params(f: Filters, tenant_id: str, column: str, with_role: bool,
            params: dict[str, Any]) -> dict[str, Any]:
    """Bind both expressions and the candidate bound (read at call time so tests can lower it)."""
    return {**params, "scoped": _scoped_match(f, tenant_id, column, with_role),
            "scope": _scope_tokens(f, tenant_id, with_role), "match": _rank_match(f, column),
            "n": filters.CANDIDATES}


def _message_hits(run: Runner, f: Filters, tenant_id: str) -> list[SearchHit]:
    table = "messages_fts" if f.mode == "words" else "messages_tri"
    where, params = where_clause(f, "m", with_role=True)
    rank = f"bm25({table}, 1.0, 0.0)" if f.mode == "words" else f"bm25({table})"
    sql = _ranked_sql(f, table, rank, "messages m", "m.id", "m.id, m.conversation_id, m.role, m.created_at",
                      where)
    return [SearchHit(kind="message", id=str(r["id"]), conversation_id=r["conversation_id"],
                      rank=r["rank"], snippet=r["snippet"], role=r["role"], created_at=r["created_at"])
            for r in run(sql, _params(f, tenant_id, "text", True, params))]


def _summary_hits(run: Runner, f: Filters, tenant_id: str) -> list[SearchHit]:
    table = "summaries_fts" if f.mode == "words" else "summaries_tri"
    where, params = where_clause(f, "s", with_role=False)
    rank = f"bm25({table}, 1.0, 0.0)" if f.mode == "words" else f"bm25({table})"
    sql = _ranked_sql(f, table, rank, "summaries s", "s.num",
                      "s.id, s.conversation_id, s.depth, s.created_at", where)
    return [SearchHit(kind="summary", id=r["id"], conversation_id=r["conversation_id"], rank=r["rank"],
                      snippet=r["snippet"], depth=r["depth"], created_at=r["created_at"])
            for r in run(sql, _params(f, tenant_id, "content", False, params))]


def search(run: Runner, tenant_id: str, q: SearchQuery, now: float | None = None) -> list[SearchHit]:
    """Hits of the tenant (conversation-scoped unless all_conversations), best rank first.

    Ranks the CANDIDATES most recent filtered matches of each scope by BM25 (see the module doc).
    With a role filter, scope `both` searches messages only (summaries have no role).
    """
    f = parse_filters(q, time.time() if now is None else now)
    hits: list[SearchHit] = []
    if q.scope in ("message", "both"):
        hits += _message_hits(run, f, tenant_id)
    if q.scope in ("summary", "both") and f.role is None:
        hits += _summary_hits(run, f, tenant_id)
    hits.sort(key=lambda h: (h.rank, h.kind, h.id))
    return hits[: f.limit]
