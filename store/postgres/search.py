"""Full-text search on PostgreSQL: the SQLite store's semantics (store/sqlite/search.py), tsvector/pg_trgm.

Same validation and filters (store/query/filters.py) and bounded ranking: each scope ranks only the
CANDIDATES most recent matches passing the filters (highest id first), best first; ranks are negative
(better = more negative) so hits of both scopes merge like bm25's. Words rank by ts_rank, with
snippets cut in Python as FTS5 cuts them (store/query/snippet.py: ts_headline's parser splits
`PED-89415-X` unlike the index, so it missed such ids); substrings rank by pg_trgm word similarity
with the first match bracketed.

Where the time goes (100k messages, bench/search_pg.py): a scope's cost is one heap visit per match of
the tenant (the GIN index yields row addresses, the id that orders candidates is in the heap), then
one rank per candidate (at most CANDIDATES). ts_rank is cheap; word_similarity generates the trigrams
of what it is given, ~25 us for a 150-character message and ~3 ms for 10 kB, so substrings rank on
a RANK_WINDOW around the first match (a tenant-wide substring search over 1,000 multi-kB tool
outputs would otherwise spend seconds ranking).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from store.models import SearchHit, SearchQuery
from store.postgres.pattern import Compiled, compile_pg
from store.query import filters
from store.query.filters import Filters, parse_filters, where_clause
from store.query.snippet import SNIPPET_TOKENS
from store.query.snippet import snippet as word_snippet
from store.runner import Runner

Statement = tuple[str, dict[str, Any]]
Kind = Literal["message", "summary"]

# Every search statement's plan: its scope's GIN index, never a sequential scan (the planner prices
# ILIKE and @@ per row like `=`, and picks reading every row where the index is 5-10x faster); no
# parallel workers or JIT (their start-up costs more than a few thousand heap rows; JIT compiling
# measured 8-23 ms per statement, and a large tenant's estimates, or a disabled plan's, cross its
# threshold). The statements are never prepared (Database.read_many): a generic plan cannot fold the
# query words into a constant, so it would unaccent them again for every row it ranks.
SETTINGS = {"enable_seqscan": "off", "max_parallel_workers_per_gather": "0", "jit": "off"}
_SNIPPET_CHARS = 48
# Substrings rank by word similarity within this many characters around the first term's first
# match (1,000 candidates of 11 kB: 1.7 s ranked whole, 0.12 s on the window, measured on
# PostgreSQL 15). A text shorter than the window ranks as a whole.
RANK_WINDOW = 256


def _where(f: Filters, alias: str, with_role: bool) -> tuple[str, dict[str, Any]]:
    where, params = where_clause(f, alias, with_role)
    params.pop("match", None)
    return where, params


def _match(c: Compiled, alias: str, column: str) -> tuple[str, str]:
    """(condition, rank expression) of the compiled pattern on one table."""
    if c.mode == "words":
        query = f"({c.expr})"
        return f"{alias}.tsv @@ {query}", f"-(ts_rank({alias}.tsv, {query}) + 1e-6)"
    col = f"{alias}.{column}"
    window = f"substr({col}, greatest(1, strpos(lower({col}), :anchor) - :half), :span)"
    return c.expr.replace("{column}", col), f"-(word_similarity(:terms, {window}) + 1e-6)"


def _sql(c: Compiled, table: str, alias: str, key: str, column: str, columns: str, where: str) -> str:
    """One statement per scope: candidates, then their ranking, then snippets of the returned rows.

    `matched` reads the scope's matches from its GIN index (tenant, conversation and role are index
    columns, so only this tenant's matching rows are fetched); MATERIALIZED keeps the planner from
    walking `key` newest first and testing every row against the pattern instead. Only (key, ctid)
    pairs are kept; the newest N are re-read by ctid (a TID scan, no index descent) and ranked, and
    only the `limit` best are returned with their text (cut to a snippet in Python).
    """
    cond, rank = _match(c, alias, column)
    out = ", ".join("hit." + item.split()[-1].split(".")[-1] for item in columns.split(", "))
    return (f"WITH matched AS MATERIALIZED (SELECT {alias}.{key} AS k, {alias}.ctid AS tid FROM {table} "
            f"{alias} WHERE {where} AND {cond}), "
            f"cand AS (SELECT tid FROM matched ORDER BY k DESC LIMIT :n) "
            f"SELECT {out}, hit.rank, hit.body AS snippet FROM (SELECT {columns}, {alias}.{column} AS body, "
            f"{rank} AS rank, {alias}.{key} AS k FROM {table} {alias} "
            f"WHERE {alias}.ctid = ANY (ARRAY(SELECT tid FROM cand)) AND {alias}.tenant_id = :tenant "
            f"ORDER BY rank, k LIMIT :limit) AS hit ORDER BY hit.rank, hit.k")


def _snippet(c: Compiled, text: str) -> str:
    """Words: FTS5's snippet of the text. Substrings: the text around the first match, matches bracketed."""
    if c.mode == "words":
        return word_snippet(text, c.phrases, SNIPPET_TOKENS["words"])
    found = [m for t in c.terms if (m := re.search(re.escape(t), text, re.IGNORECASE))]
    start = min((m.start() for m in found), default=0)
    lo = max(0, start - _SNIPPET_CHARS // 2)
    window = text[lo:lo + _SNIPPET_CHARS * 2]
    for term in sorted(set(c.terms), key=len, reverse=True):
        window = re.sub(re.escape(term), lambda m: f"[{m.group(0)}]", window, count=1, flags=re.IGNORECASE)
    return ("…" if lo else "") + window + ("…" if lo + _SNIPPET_CHARS * 2 < len(text) else "")


def _params(c: Compiled, params: dict[str, Any]) -> dict[str, Any]:
    anchor = c.terms[0].lower() if c.terms else ""
    return {**params, **c.params, "terms": " ".join(c.terms), "n": filters.CANDIDATES,
            "anchor": anchor, "half": RANK_WINDOW // 2, "span": RANK_WINDOW + len(anchor)}


def _message_statement(c: Compiled, f: Filters) -> Statement:
    where, params = _where(f, "m", with_role=True)
    sql = _sql(c, "messages", "m", "id", "text", "m.id, m.conversation_id, m.role, m.created_at", where)
    return sql, _params(c, params)


def _summary_statement(c: Compiled, f: Filters) -> Statement:
    where, params = _where(f, "s", with_role=False)
    sql = _sql(c, "summaries", "s", "num", "content", "s.id AS sid, s.conversation_id, s.depth, s.created_at",
               where)
    return sql, _params(c, params)


def _hit(kind: Kind, c: Compiled, r: Any) -> SearchHit:
    if kind == "message":
        return SearchHit(kind="message", id=str(r["id"]), conversation_id=r["conversation_id"],
                         rank=float(r["rank"]), snippet=_snippet(c, r["snippet"]), role=r["role"],
                         created_at=r["created_at"])
    return SearchHit(kind="summary", id=r["sid"], conversation_id=r["conversation_id"], rank=float(r["rank"]),
                     snippet=_snippet(c, r["snippet"]), depth=r["depth"], created_at=r["created_at"])


@dataclass(frozen=True)
class Planned:
    """A search as statements, one per scope searched (independent: they can go in one round trip),
    and how their rows become hits."""

    compiled: Compiled
    limit: int
    kinds: tuple[Kind, ...]
    statements: tuple[Statement, ...]

    def hits(self, results: Sequence[Iterable[Any]]) -> list[SearchHit]:
        """Each statement's rows (in statement order) as hits: both scopes merged by rank, cut to limit."""
        found = [_hit(kind, self.compiled, r) for kind, rows in zip(self.kinds, results, strict=True)
                 for r in rows]
        found.sort(key=lambda h: (h.rank, h.kind, h.id))
        return found[: self.limit]


def plan(q: SearchQuery, now: float | None = None) -> Planned:
    """The statements of a search (validated exactly as the SQLite store validates)."""
    f = parse_filters(q, time.time() if now is None else now)
    c = compile_pg(q.pattern)
    kinds: list[Kind] = []
    if q.scope in ("message", "both"):
        kinds.append("message")
    if q.scope in ("summary", "both") and f.role is None:
        kinds.append("summary")
    build = {"message": _message_statement, "summary": _summary_statement}
    return Planned(c, f.limit, tuple(kinds), tuple(build[k](c, f) for k in kinds))


def search(run: Runner, q: SearchQuery, now: float | None = None) -> list[SearchHit]:
    """Hits of the tenant, best rank first (the SQLite store's contract, store/sqlite/search.py), one
    statement at a time through `run` (the store sends them in one round trip: PgTenantConnection.search)."""
    planned = plan(q, now)
    return planned.hits([run(sql, params).fetchall() for sql, params in planned.statements])
