"""Bounded ranking: bm25 orders only the CANDIDATES most recent matches that pass every filter.

Expected results are computed independently, straight from the FTS5 tables: every match's bm25,
the filters applied in Python, the most recent N kept, then sorted by rank.
"""

from __future__ import annotations

from typing import Any

import pytest

import store.query.filters as filters_mod
from compaction.types import Message
from store.models import SearchQuery, SummaryDraft
from store.postgres.store import PgStore
from store.sqlite.store import Store
from store.tenant import TenantStore
from tests.store.store_helpers import TokenCounter, require_sqlite, set_created_at, sql

N = 6  # the lowered candidate bound these tests run with (the real one is 1,000)


def _texts(count: int) -> list[dict[str, Any]]:
    """Oldest three messages rank best (three hits, short); newer ones are single, longer hits."""
    msgs: list[Message] = []
    for i in range(count):
        text = ("invoice invoice invoice" + " overdue" * (i + 1) if i < 3
                else f"note {i}: the invoice went out " + " ".join(f"w{j}" for j in range(i % 7 + 2)))
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return msgs


@pytest.fixture
def convo(alice: TenantStore, counter: TokenCounter) -> dict[str, Any]:
    result = alice.ingest(_texts(20), model="m", external_id=None, count_tokens=counter)
    return {"cid": result.conversation.id, "ids": [m.id for m in result.messages]}


def _expected(store: Store, pattern_sql: str, words: bool, allowed: set[int], n: int, limit: int
              ) -> list[tuple[str, float]]:
    """(id, rank) of the best `limit` among the `n` most recent allowed matches, computed directly."""
    table, rank = ("messages_fts", "bm25(messages_fts, 1.0, 0.0)") if words else ("messages_tri",
                                                                                  "bm25(messages_tri)")
    rows = store.conn.execute(f"SELECT rowid, {rank} FROM {table} WHERE {table} MATCH ?",
                              (pattern_sql,)).fetchall()
    recent = sorted((r for r in rows if r[0] in allowed), key=lambda r: -r[0])[:n]
    return [(str(rowid), score) for rowid, score in sorted(recent, key=lambda r: (r[1], str(r[0])))][:limit]


def _got(hits: list[Any]) -> list[tuple[str, float]]:
    return [(h.id, h.rank) for h in hits]


@pytest.mark.parametrize(("pattern", "fts_match", "words"), [
    ("invoice", 'text : ("invoice")', True),
    ("%nvoic%", '"nvoic"', False),
])
def test_more_matches_than_candidates_ranks_the_most_recent(
        store: Store, alice: TenantStore, convo: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
        pattern: str, fts_match: str, words: bool) -> None:
    require_sqlite(store)  # the expected ranks are read from FTS5 directly
    ids = convo["ids"]
    full = alice.search(SearchQuery(pattern, conversation_id=convo["cid"], scope="message", limit=3))
    assert [h.id for h in full] == [str(i) for i in ids[:3]]  # under the bound: the old best ones win
    assert _got(full) == _expected(store, fts_match, words, set(ids), 1_000, 3)

    monkeypatch.setattr(filters_mod, "CANDIDATES", N)
    hits = alice.search(SearchQuery(pattern, conversation_id=convo["cid"], scope="message", limit=3))
    assert _got(hits) == _expected(store, fts_match, words, set(ids), N, 3)  # same bm25 values
    assert {h.id for h in hits} <= {str(i) for i in ids[-N:]}
    assert len(hits) == 3


@pytest.mark.parametrize("pattern", ["invoice", "%nvoic%"])
def test_filters_apply_before_the_cut(store: Store, alice: TenantStore, convo: dict[str, Any],
                                      monkeypatch: pytest.MonkeyPatch, pattern: str) -> None:
    """Role and time filters pick the N candidates; they never thin out an already cut list."""
    monkeypatch.setattr(filters_mod, "CANDIDATES", N)
    ids = convo["ids"]
    users = alice.search(SearchQuery(pattern, conversation_id=convo["cid"], role="user", limit=N))
    assert {h.id for h in users} == {str(i) for i in ids[0::2][-N:]}
    old = ids[:10]
    set_created_at(store, "messages", old, 1_000_000.0)  # the ten oldest move to 1970
    before = alice.search(SearchQuery(pattern, conversation_id=convo["cid"], before="1971-01-01",
                                      scope="message", limit=N))
    assert {h.id for h in before} == {str(i) for i in old[-N:]}


@pytest.mark.parametrize("pattern", ["invoice", "%nvoic%"])
def test_tenant_wide_cut_counts_only_the_tenants_matches(
        alice: TenantStore, bob: TenantStore, convo: dict[str, Any], counter: TokenCounter,
        monkeypatch: pytest.MonkeyPatch, pattern: str) -> None:
    bob.ingest(_texts(20), model="m", external_id=None, count_tokens=counter)  # newer, other tenant
    monkeypatch.setattr(filters_mod, "CANDIDATES", N)
    hits = alice.search(SearchQuery(pattern, all_conversations=True, scope="message", limit=N))
    assert {h.id for h in hits} == {str(i) for i in convo["ids"][-N:]}
    assert [h.rank for h in hits] == sorted(h.rank for h in hits)


@pytest.mark.parametrize("pattern", ["invoice", "%nvoic%"])
def test_summaries_are_cut_the_same_way(alice: TenantStore, convo: dict[str, Any],
                                        monkeypatch: pytest.MonkeyPatch, pattern: str) -> None:
    ids = convo["ids"]
    made = [alice.add_summary(SummaryDraft(convo["cid"], "leaf", 0, "normal",
                                           "invoice invoice invoice" if i == 0 else f"an invoice, part {i}",
                                           5, i, i, (ids[i],))).id for i in range(N + 2)]
    best = alice.search(SearchQuery(pattern, conversation_id=convo["cid"], scope="summary", limit=1))
    assert [h.id for h in best] == [made[0]]  # under the bound: the oldest, best one
    monkeypatch.setattr(filters_mod, "CANDIDATES", N)
    cut = alice.search(SearchQuery(pattern, conversation_id=convo["cid"], scope="summary", limit=N + 2))
    assert {h.id for h in cut} == set(made[-N:])


def _pg_expected(store: PgStore, tenant: str, match: str, rank: str, allowed: set[int], n: int, limit: int
                 ) -> list[tuple[str, float]]:
    """(id, rank) of the best `limit` among the `n` most recent allowed matches, from a plain scan: the
    cut breaks rank ties by id, the hits are then listed as the store lists them (by rank, then id text)."""
    rows = sql(store, f"SELECT id, -({rank} + 1e-6) FROM messages WHERE tenant_id = ? AND {match}", (tenant,))
    recent = sorted((r for r in rows if r[0] in allowed), key=lambda r: -r[0])[:n]
    best = sorted(recent, key=lambda r: (r[1], r[0]))[:limit]
    return sorted(((str(i), float(score)) for i, score in best), key=lambda h: (h[1], h[0]))


@pytest.mark.parametrize(("pattern", "match", "rank"), [
    ("invoice", "tsv @@ to_tsquery('simple', 'invoice')", "ts_rank(tsv, to_tsquery('simple', 'invoice'))"),
    ("%nvoic%", "text ILIKE '%%nvoic%%'", "word_similarity('nvoic', text)"),
])
def test_postgres_ranks_the_most_recent_candidates(
        store: Store, alice: TenantStore, bob: TenantStore, convo: dict[str, Any], counter: TokenCounter,
        monkeypatch: pytest.MonkeyPatch, pattern: str, match: str, rank: str) -> None:
    """The candidate cut, ranking and tie order equal a direct computation over every row (PostgreSQL)."""
    if not isinstance(store, PgStore):
        pytest.skip("computes the expected ranks with PostgreSQL functions")
    bob.ingest(_texts(20), model="m", external_id=None, count_tokens=counter)  # same texts, other tenant
    ids = set(convo["ids"])
    for n, limit in ((1_000, 20), (N, 3), (N, N)):
        monkeypatch.setattr(filters_mod, "CANDIDATES", n)
        hits = alice.search(SearchQuery(pattern, all_conversations=True, scope="message", limit=limit))
        assert _got(hits) == _pg_expected(store, alice.tenant_id, match, rank, ids, n, limit)
    users = set(convo["ids"][0::2])  # the role filter picks the candidates, never thins a cut list
    cut = alice.search(SearchQuery(pattern, all_conversations=True, role="user", limit=N))
    assert _got(cut) == _pg_expected(store, alice.tenant_id, match, rank, users, N, N)


def test_postgres_ranks_a_long_text_on_the_window_around_its_match(
        store: Store, alice: TenantStore, counter: TokenCounter) -> None:
    """A multi-kB tool output ranks by word similarity near its first term's first match
    (search.RANK_WINDOW): the terms found there rank it high, whatever surrounds them."""
    if not isinstance(store, PgStore):
        pytest.skip("PostgreSQL's word-similarity ranking")
    from store.postgres.search import RANK_WINDOW

    filler = " ".join(f"x{j:05d}" for j in range(3_000))  # ~21 kB of unrelated words
    near = "the overdue invoice for ORD-7 was paid"
    long_text = f"{filler} {near} {filler}"
    assert len(long_text) > 100 * RANK_WINDOW
    alice.ingest([{"role": "tool", "tool_call_id": "c1", "content": long_text},
                  {"role": "user", "content": near}], model="m", external_id=None, count_tokens=counter)
    hits = alice.search(SearchQuery("%overdue invoice%", all_conversations=True, scope="message"))
    assert [h.role for h in hits] and len(hits) == 2
    window_rank = sql(store, "SELECT -(word_similarity('overdue invoice', substr(text, greatest(1, "
                             "strpos(lower(text), 'overdue') - ?), ?)) + 1e-6) FROM messages "
                             "WHERE role = 'tool'", (RANK_WINDOW // 2, RANK_WINDOW + 7))[0][0]
    by_role = {h.role: h.rank for h in hits}
    assert by_role["tool"] == pytest.approx(float(window_rank)) and by_role["tool"] < -0.5
    assert "[overdue] [invoice]" in next(h.snippet for h in hits if h.role == "tool")
