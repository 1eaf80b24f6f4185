"""PostgreSQL search: migration 8 on a store with data, the plan it gives search, one-round-trip reads.

The plan test reads EXPLAIN, not a clock: each scope's candidates come from its tenant-scoped GIN index
(tenant in the index condition, never a sequential scan), the query words are one folded constant.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from config.errors import StoreError
from config.settings import StoreSettings
from store.models import SearchQuery, SummaryDraft
from store.postgres import search as pg_search
from store.postgres.db import Database
from store.postgres.migrations import MIGRATIONS, apply_migrations
from store.postgres.store import PgStore, PgTenantConnection
from tests.store.store_helpers import TokenCounter

SEARCH_INDEXES = {"messages_scope_tsv", "messages_scope_trgm", "summaries_scope_tsv", "summaries_scope_trgm",
                  "messages_tenant_created"}
OLD_INDEXES = {"messages_tsv_gin", "messages_text_trgm", "summaries_tsv_gin", "summaries_content_trgm"}


def _indexes(db: Database) -> set[str]:
    rows = db.execute("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")
    return {str(r[0]) for r in rows}


def _texts(tag: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You help with billing."},
            {"role": "user", "content": f"The invoice for {tag} is overdue; see parse_invoice_v2."},
            {"role": "assistant", "content": f"Le café est prêt: the {tag} refund is approved."},
            {"role": "user", "content": f"Payment failed twice for {tag}."}]


def test_migration_8_applies_on_a_store_with_data(pg_url: str) -> None:
    db = Database(pg_url)
    apply_migrations(db, tuple(m for m in MIGRATIONS if m.version < 8))
    db.execute("INSERT INTO meta (key, value) VALUES ('tenant_secret', :v)", {"v": "s" * 64})
    store = PgStore(db, "s" * 64, StoreSettings(url=pg_url))
    alice, bob = (store.for_tenant(store.tenant_id_for_key(k)) for k in ("sk-alice", "sk-bob"))
    counter = TokenCounter()
    mine = alice.ingest(_texts("ACME"), model="m", external_id=None, count_tokens=counter)
    bob.ingest(_texts("Globex"), model="m", external_id=None, count_tokens=counter)
    ids = [m.id for m in mine.messages]
    cid = mine.conversation.id
    summary = alice.add_summary(SummaryDraft(cid, "leaf", 0, "normal", "Intent: chase the overdue invoice.",
                                             8, 0, 3, tuple(ids[:4])))
    assert _indexes(db) >= OLD_INDEXES and not SEARCH_INDEXES & _indexes(db)

    assert apply_migrations(db, tuple(m for m in MIGRATIONS if m.version <= 8)) == [8]
    assert _indexes(db) >= SEARCH_INDEXES and not OLD_INDEXES & _indexes(db)

    def found(pattern: str, **kw: Any) -> set[str]:
        return {h.id for h in alice.search(SearchQuery(pattern, all_conversations=True, **kw))}

    assert found("invoice") == {str(ids[1]), summary.id}  # rows written before the migration
    assert found("cafe", role="assistant") == {str(ids[2])}
    assert found('"payment failed"') == {str(ids[3])}
    assert found("%nvoice_v%") == {str(ids[1])}
    assert found("overdue", scope="summary") == {summary.id}
    assert found("%lobex%") == set()  # bob's rows are indexed under bob
    store.close()


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[PgStore]:
    store = PgStore.open(StoreSettings(url=pg_url))
    yield store
    store.close()


def _bulk(store: PgStore, tenants: list[str], per_tenant: int) -> None:
    """Two tenants' messages written in one statement each (the trigger fills tsv), then VACUUM ANALYZE
    (as autovacuum leaves a table: statistics, and the GIN pending lists merged into the indexes)."""
    for t in tenants:
        store.db.execute("INSERT INTO conversations (id, tenant_id, model, created_at, updated_at) "
                         "VALUES (:cid, :t, 'm', 0, 0)", {"cid": "conv_" + t[:8], "t": t})
        store.db.execute(
            "INSERT INTO messages (tenant_id, conversation_id, seq, role, token_count, chain_hash, "
            "content_hash, created_at, message_json, text) SELECT :t, :cid, i, "
            "CASE WHEN i % 2 = 0 THEN 'user' ELSE 'assistant' END, 10, md5(:t::text || i), md5(i::text), i, "
            "'{}', "
            "'note ' || i || ' about w' || (i % 97) || ' and ' || md5(i::text) "
            "FROM generate_series(1, :n) AS i", {"t": t, "cid": "conv_" + t[:8], "n": per_tenant})
    store.db.execute("VACUUM ANALYZE messages")


def _plans(tenant: PgTenantConnection, store: PgStore, q: SearchQuery) -> list[dict[str, Any]]:
    """EXPLAIN (FORMAT JSON) of every statement the search runs, sent as the store sends them."""
    planned = pg_search.plan(q)
    explained = store.db.read_many([tenant._bound("EXPLAIN (FORMAT JSON) " + sql, params)
                                    for sql, params in planned.statements], pg_search.SETTINGS)
    return [r.fetchall()[0][0][0]["Plan"] for r in explained]


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


@pytest.mark.parametrize(("pattern", "index"), [("w13", "messages_scope_tsv"),
                                                ("w13 OR w17", "messages_scope_tsv"),
                                                ("%w13 and%", "messages_scope_trgm")])
def test_candidates_come_from_the_tenants_index_entries(pg_store: PgStore, pattern: str, index: str) -> None:
    tenants = [pg_store.tenant_id_for_key("sk-alice"), pg_store.tenant_id_for_key("sk-bob")]
    _bulk(pg_store, tenants, 3_000)
    alice = pg_store.for_tenant(tenants[0])
    q = SearchQuery(pattern, scope="message", all_conversations=True, limit=5)
    (plan,) = _plans(PgTenantConnection(pg_store, tenants[0]), pg_store, q)
    nodes = list(_nodes(plan))
    assert not [n for n in nodes if n["Node Type"] == "Seq Scan"]
    scans = [n for n in nodes if n["Node Type"] == "Bitmap Index Scan"]
    assert [n["Index Name"] for n in scans] == [index]
    assert "tenant_id = " in scans[0]["Index Cond"]
    assert "ctxproxy_query_words" not in str(plan)  # folded into a constant at planning
    hits = alice.search(q)
    assert len(hits) == 5 and all(h.snippet for h in hits)


def test_read_many_settings_and_failures(pg_store: PgStore) -> None:
    db = pg_store.db
    setting = "SELECT current_setting('enable_seqscan') AS v, :x::int AS x"
    first, second = db.read_many([(setting, {"x": 1}), (setting, {"x": 2})], {"enable_seqscan": "off"})
    assert [(r[0], r[1]) for r in first] == [("off", 1)] and second.fetchone()["x"] == 2
    assert db.execute(setting, {"x": 3}).fetchall()[0][0] == "on"  # local to that round trip
    with pytest.raises(StoreError, match="DataError"):
        db.read_many([(setting, {"x": 1}), ("SELECT 1 / :zero", {"zero": 0})], {"enable_seqscan": "off"})
    assert db.execute(setting, {"x": 4}).fetchall()[0][0] == "on"  # rolled back, connection usable
    with db.transaction():
        db.execute("INSERT INTO meta (key, value) VALUES ('k', 'v')")
        (seen,) = db.read_many([("SELECT value FROM meta WHERE key = 'k'", {})])
        assert seen.fetchone()[0] == "v"  # inside the open transaction
