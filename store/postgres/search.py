"""Full-text search on PostgreSQL: the SQLite store's semantics (store/search.py) over tsvector/pg_trgm.

Same validation, filters and bounded ranking: each scope ranks only the CANDIDATES most recent matches
passing the filters (highest id first), best first; ranks are negative (better = more negative) so
hits of both scopes merge like bm25's. Words rank by ts_rank with ts_headline snippets; substrings
by pg_trgm word similarity with the first match bracketed.
"""

from __future__ import annotations

import re
import time
from typing import Any

from store import search as sqlite_search
from store.ingest import Runner
from store.models import SearchHit, SearchQuery
from store.postgres.pattern import Compiled, compile_pg
from store.search import Filters

_HEADLINE = "StartSel=[, StopSel=], MaxWords=16, MinWords=6, ShortWord=0, FragmentDelimiter=…"
_SNIPPET_CHARS = 48


def _where(f: Filters, alias: str, with_role: bool) -> tuple[str, dict[str, Any]]:
    where, params = sqlite_search.where_clause(f, alias, with_role)
    params.pop("match", None)
    return where, params


def _match(c: Compiled, alias: str, column: str) -> tuple[str, str]:
    """(condition, rank expression) of the compiled pattern on one table."""
    if c.mode == "words":
        query = f"({c.expr})"
        return f"{alias}.tsv @@ {query}", f"-(ts_rank({alias}.tsv, {query}) + 1e-6)"
    cond = c.expr.replace("{column}", f"{alias}.{column}")
    return cond, f"-(word_similarity(:terms, {alias}.{column}) + 1e-6)"


def _sql(c: Compiled, table: str, alias: str, column: str, columns: str, where: str) -> str:
    cond, rank = _match(c, alias, column)
    snippet = (f"ts_headline('simple', {alias}.{column}, ({c.expr}), '{_HEADLINE}')" if c.mode == "words"
               else f"{alias}.{column}")
    # Matches come from the GIN index first (MATERIALIZED: the planner must not walk the primary key
    # newest first, testing every row against the pattern), then the newest N are kept.
    return (f"WITH matched AS MATERIALIZED (SELECT {alias}.id FROM {table} {alias} "
            f"WHERE {where} AND {cond}), cand AS (SELECT id FROM matched ORDER BY id DESC LIMIT :n), "
            f"hit AS (SELECT {alias}.id, {rank} AS rank FROM {table} {alias} "
            f"WHERE {alias}.tenant_id = :tenant AND {alias}.id IN (SELECT id FROM cand) "
            f"ORDER BY rank, {alias}.id LIMIT :limit) "
            f"SELECT {columns}, hit.rank AS rank, {snippet} AS snippet FROM hit JOIN {table} {alias} "
            f"ON {alias}.id = hit.id AND {alias}.tenant_id = :tenant ORDER BY hit.rank")


def _snippet(c: Compiled, text: str) -> str:
    """Words: ts_headline's. Substrings: the text around the first match, each match bracketed."""
    if c.mode == "words":
        return text
    found = [m for t in c.terms if (m := re.search(re.escape(t), text, re.IGNORECASE))]
    start = min((m.start() for m in found), default=0)
    lo = max(0, start - _SNIPPET_CHARS // 2)
    window = text[lo:lo + _SNIPPET_CHARS * 2]
    for term in sorted(set(c.terms), key=len, reverse=True):
        window = re.sub(re.escape(term), lambda m: f"[{m.group(0)}]", window, count=1, flags=re.IGNORECASE)
    return ("…" if lo else "") + window + ("…" if lo + _SNIPPET_CHARS * 2 < len(text) else "")


def _params(c: Compiled, params: dict[str, Any]) -> dict[str, Any]:
    return {**params, **c.params, "terms": " ".join(c.terms), "n": sqlite_search.CANDIDATES}


def _message_hits(run: Runner, c: Compiled, f: Filters) -> list[SearchHit]:
    where, params = _where(f, "m", with_role=True)
    sql = _sql(c, "messages", "m", "text", "m.id, m.conversation_id, m.role, m.created_at", where)
    return [SearchHit(kind="message", id=str(r["id"]), conversation_id=r["conversation_id"],
                      rank=float(r["rank"]), snippet=_snippet(c, r["snippet"]), role=r["role"],
                      created_at=r["created_at"]) for r in run(sql, _params(c, params))]


def _summary_hits(run: Runner, c: Compiled, f: Filters) -> list[SearchHit]:
    where, params = _where(f, "s", with_role=False)
    # summaries' key is `num`; the SQL reads `id`, so alias it through a sub-select
    table = "(SELECT num AS id, id AS sid, tenant_id, conversation_id, depth, content, created_at, tsv " \
            "FROM summaries WHERE tenant_id = :tenant)"
    sql = _sql(c, table, "s", "content", "s.sid, s.conversation_id, s.depth, s.created_at", where)
    return [SearchHit(kind="summary", id=r["sid"], conversation_id=r["conversation_id"],
                      rank=float(r["rank"]), snippet=_snippet(c, r["snippet"]), depth=r["depth"],
                      created_at=r["created_at"]) for r in run(sql, _params(c, params))]


def search(run: Runner, q: SearchQuery, now: float | None = None) -> list[SearchHit]:
    """Hits of the tenant, best rank first (the SQLite store's contract, store/search.py)."""
    f = sqlite_search.parse_filters(q, time.time() if now is None else now)
    c = compile_pg(q.pattern)
    hits: list[SearchHit] = []
    if q.scope in ("message", "both"):
        hits += _message_hits(run, c, f)
    if q.scope in ("summary", "both") and f.role is None:
        hits += _summary_hits(run, c, f)
    hits.sort(key=lambda h: (h.rank, h.kind, h.id))
    return hits[: f.limit]
