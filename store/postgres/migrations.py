"""Numbered PostgreSQL schema migrations, each applied in its own transaction and recorded.

The same tables and columns as the SQLite schema (store/sqlite/migrations.py), so the store's portable SQL
runs unchanged; full-text search is a `tsv` column kept by a trigger (unaccented 'simple' words,
GIN-indexed) plus a pg_trgm index for substrings. Every migration transaction first takes one
advisory lock, so replicas starting together apply each migration exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from config.errors import StoreError
from store.interface import refuse_newer_schema
from store.postgres.db import Database
from store.summaries import dedupe_summaries
from store.upgrades.rehash import rehash_messages

_INITIAL = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE conversations (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, model TEXT NOT NULL, external_id TEXT,
    forked_from TEXT, message_count BIGINT NOT NULL DEFAULT 0, created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL, rowid BIGSERIAL NOT NULL UNIQUE);
CREATE INDEX conversations_tenant_external ON conversations (tenant_id, external_id, created_at);
CREATE INDEX conversations_tenant_updated ON conversations (tenant_id, updated_at);
CREATE TABLE messages (
    id BIGSERIAL PRIMARY KEY, tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id), seq BIGINT NOT NULL, role TEXT NOT NULL,
    token_count BIGINT NOT NULL, chain_hash TEXT NOT NULL, content_hash TEXT NOT NULL,
    pinned BIGINT NOT NULL DEFAULT 0, source TEXT NOT NULL DEFAULT 'client',
    created_at DOUBLE PRECISION NOT NULL, message_json TEXT NOT NULL, text TEXT NOT NULL, tsv TSVECTOR,
    UNIQUE (conversation_id, seq));
CREATE INDEX messages_tenant_chain ON messages (tenant_id, chain_hash, seq, conversation_id);
CREATE TABLE summaries (
    num BIGSERIAL PRIMARY KEY, id TEXT NOT NULL UNIQUE, tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id), kind TEXT NOT NULL, depth BIGINT NOT NULL,
    generation BIGINT NOT NULL, level TEXT NOT NULL, content TEXT NOT NULL, token_count BIGINT NOT NULL,
    first_seq BIGINT NOT NULL, last_seq BIGINT NOT NULL, model TEXT NOT NULL, prompt_version TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL, tsv TSVECTOR);
CREATE INDEX summaries_conversation ON summaries (conversation_id, num);
CREATE TABLE summary_sources (
    tenant_id TEXT NOT NULL, summary_id TEXT NOT NULL REFERENCES summaries (id),
    source_kind TEXT NOT NULL CHECK (source_kind IN ('message', 'summary')), source_id TEXT NOT NULL,
    ord BIGINT NOT NULL, PRIMARY KEY (summary_id, ord));
CREATE INDEX summary_sources_source ON summary_sources (source_kind, source_id);
CREATE TABLE anchors (
    id BIGSERIAL PRIMARY KEY, tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id), kind TEXT NOT NULL, key TEXT NOT NULL,
    value TEXT NOT NULL, source_message_id BIGINT, source_seq BIGINT NOT NULL DEFAULT -1,
    status TEXT NOT NULL DEFAULT 'active', superseded_by BIGINT, created_at DOUBLE PRECISION NOT NULL);
CREATE INDEX anchors_lookup ON anchors (conversation_id, kind, key, status);
CREATE TABLE views (
    tenant_id TEXT NOT NULL, conversation_id TEXT NOT NULL REFERENCES conversations (id),
    version BIGINT NOT NULL, items_json TEXT NOT NULL, covered_through_seq BIGINT NOT NULL,
    anchor_ids_json TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (conversation_id, version));
CREATE TABLE compaction_events (
    id BIGSERIAL PRIMARY KEY, tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id), trigger TEXT NOT NULL, tier TEXT NOT NULL,
    level TEXT NOT NULL, outcome TEXT NOT NULL, summarizer_model TEXT NOT NULL,
    summarizer_settings_json TEXT NOT NULL, prompt_version TEXT NOT NULL,
    source_message_ids_json TEXT NOT NULL, source_summary_ids_json TEXT NOT NULL, summary_id TEXT,
    depth BIGINT, generation BIGINT, tokens_before BIGINT NOT NULL, tokens_after BIGINT NOT NULL,
    verification TEXT NOT NULL, rejected_facts_json TEXT NOT NULL, anchors_added_json TEXT NOT NULL,
    anchors_superseded_json TEXT NOT NULL, duration_ms DOUBLE PRECISION NOT NULL, error TEXT,
    created_at DOUBLE PRECISION NOT NULL);
CREATE INDEX compaction_events_conversation ON compaction_events (conversation_id, id);
CREATE TABLE forwarded (
    id BIGSERIAL PRIMARY KEY, tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id), messages_forwarded BIGINT NOT NULL,
    shared_prefix BIGINT NOT NULL, extends_previous BIGINT, tokens_received BIGINT NOT NULL,
    tokens_forwarded BIGINT NOT NULL, budget BIGINT NOT NULL, occupancy_json TEXT NOT NULL,
    compacted BIGINT NOT NULL, view_version BIGINT NOT NULL, created_at DOUBLE PRECISION NOT NULL);
CREATE INDEX forwarded_conversation ON forwarded (conversation_id, id);
CREATE TABLE forwarded_tips (
    conversation_id TEXT PRIMARY KEY REFERENCES conversations (id), tenant_id TEXT NOT NULL,
    hashes BYTEA NOT NULL);
CREATE TABLE tool_rounds (
    id BIGSERIAL PRIMARY KEY, tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id), calls_json TEXT NOT NULL,
    results_json TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL);
CREATE INDEX tool_rounds_conversation ON tool_rounds (conversation_id, id);
"""

# Words: unaccented 'simple' lexemes (no stemming, no stop words: like FTS5 unicode61 with
# remove_diacritics). Substrings: pg_trgm over the raw text (ILIKE uses the index).
_SEARCH = """
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION IF NOT EXISTS unaccent;
CREATE FUNCTION ctxproxy_words(doc TEXT) RETURNS TSVECTOR LANGUAGE sql STABLE
    AS $$ SELECT to_tsvector('simple', unaccent(doc)) $$;
CREATE FUNCTION ctxproxy_messages_tsv() RETURNS TRIGGER LANGUAGE plpgsql
    AS $$ BEGIN NEW.tsv := ctxproxy_words(NEW.text); RETURN NEW; END $$;
CREATE FUNCTION ctxproxy_summaries_tsv() RETURNS TRIGGER LANGUAGE plpgsql
    AS $$ BEGIN NEW.tsv := ctxproxy_words(NEW.content); RETURN NEW; END $$;
CREATE TRIGGER messages_tsv BEFORE INSERT OR UPDATE OF text ON messages
    FOR EACH ROW EXECUTE FUNCTION ctxproxy_messages_tsv();
CREATE TRIGGER summaries_tsv BEFORE INSERT OR UPDATE OF content ON summaries
    FOR EACH ROW EXECUTE FUNCTION ctxproxy_summaries_tsv();
CREATE INDEX messages_tsv_gin ON messages USING gin (tsv);
CREATE INDEX summaries_tsv_gin ON summaries USING gin (tsv);
CREATE INDEX messages_text_trgm ON messages USING gin (text gin_trgm_ops);
CREATE INDEX summaries_content_trgm ON summaries USING gin (content gin_trgm_ops);
"""

_LEASES = """
CREATE TABLE step_leases (
    tenant_id TEXT NOT NULL, conversation_id TEXT NOT NULL, holder TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (tenant_id, conversation_id));
"""


def _summary_source_keys(db: Database) -> None:
    """Migration 4: every summary keyed by what it replaces (store/summaries.py), duplicates folded
    into their oldest copy, then the key made unique per conversation."""
    db.execute("ALTER TABLE summaries ADD COLUMN source_key TEXT")
    dedupe_summaries(db.execute)
    db.execute("CREATE UNIQUE INDEX summaries_source_key ON summaries (conversation_id, source_key)")


def _summary_keys_with_content(db: Database) -> None:
    """Migration 7: every summary re-keyed with its content (store/summaries.py); only exact
    duplicates fold, which the key had already kept out."""
    dedupe_summaries(db.execute)


def _identity_by_meaning(db: Database) -> None:
    """Migration 10: identity hashes recomputed (store/upgrades/rehash.py): tool arguments hashed by
    their JSON value, per-request marks ignored, so stored conversations are still found by their
    resends."""
    rehash_messages(db.execute)


# Documents split exactly as queries are (store/postgres/pattern.py) and as FTS5 unicode61 splits
# them: on anything but letters and digits. The default parser's own token types kept
# `OrderService3.retry` (a host), `src/module_3.py` (a file) or `-2093` (a signed number) whole,
# so words inside them were never found.
_WORD_SPLIT = """
CREATE OR REPLACE FUNCTION ctxproxy_words(doc TEXT) RETURNS TSVECTOR LANGUAGE sql STABLE
    AS $$ SELECT to_tsvector('simple', regexp_replace(unaccent(doc), '[^[:alnum:]]+', ' ', 'g')) $$;
UPDATE messages SET tsv = ctxproxy_words(text);
UPDATE summaries SET tsv = ctxproxy_words(content);
"""


# Search reads only the searching tenant's rows: tenant, conversation and role are GIN columns (btree_gin)
# beside the words and the trigrams, so the index intersects them with the pattern instead of the
# heap rechecking every tenant's matches; a tenant's messages by time serve narrow windows (`last`).
# A query's words are folded once by the planner (`ctxproxy_query_words` is declared IMMUTABLE:
# unaccent's dictionary never changes under a running store), not re-unaccented for every row ranked.
_SEARCH_SCOPE = """
CREATE EXTENSION IF NOT EXISTS btree_gin;
CREATE FUNCTION ctxproxy_query_words(query TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT regexp_replace(unaccent(query), '[^[:alnum:]]+', ' ', 'g') $$;
DROP INDEX messages_tsv_gin;
DROP INDEX messages_text_trgm;
DROP INDEX summaries_tsv_gin;
DROP INDEX summaries_content_trgm;
CREATE INDEX messages_scope_tsv ON messages USING gin (tenant_id, conversation_id, role, tsv);
CREATE INDEX messages_scope_trgm ON messages USING gin (tenant_id, conversation_id, role, text gin_trgm_ops);
CREATE INDEX summaries_scope_tsv ON summaries USING gin (tenant_id, conversation_id, tsv);
CREATE INDEX summaries_scope_trgm ON summaries USING gin (tenant_id, conversation_id, content gin_trgm_ops);
CREATE INDEX messages_tenant_created ON messages (tenant_id, created_at);
"""


_PROVIDER_OBJECTS = """
CREATE TABLE provider_objects (
    tenant_id TEXT NOT NULL, object_id TEXT NOT NULL, kind TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (tenant_id, object_id));
"""


_FORWARDED_COST = """
ALTER TABLE forwarded ADD COLUMN prefix_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE forwarded ADD COLUMN full_prefix_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE forwarded ADD COLUMN billed_input_estimate BIGINT NOT NULL DEFAULT 0;
ALTER TABLE forwarded ADD COLUMN full_history_billed_estimate BIGINT NOT NULL DEFAULT 0;
ALTER TABLE forwarded ADD COLUMN cache_read_tokens BIGINT;
ALTER TABLE forwarded_tips ADD COLUMN received_hashes BYTEA;
ALTER TABLE forwarded_tips ADD COLUMN tools_digests BYTEA;
"""

_SOURCE_SPANS = """
CREATE TABLE summary_source_spans (
    summary_id TEXT PRIMARY KEY REFERENCES summaries (id), tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL, first_id BIGINT NOT NULL, last_id BIGINT NOT NULL);
CREATE INDEX summary_source_spans_conversation ON summary_source_spans (conversation_id);
"""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str | Callable[[Database], None]  # a script, or a step run inside the migration's transaction


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", _INITIAL),
    Migration(2, "full-text search: tsvector words (unaccent) and pg_trgm substrings", _SEARCH),
    Migration(3, "leases on background compaction steps (one replica per step)", _LEASES),
    Migration(4, "a summary of the same sources stored once per conversation (unique source key)",
              _summary_source_keys),
    Migration(5, "words split on anything but letters and digits, as queries are", _WORD_SPLIT),
    Migration(6, "pinned messages indexed (ingest reads a resent history's pins, not its rows)",
              "CREATE INDEX messages_pinned ON messages (conversation_id, seq) WHERE pinned = 1;\n"),
    Migration(7, "a summary's key covers its content (a tighter re-summary is a summary of its own)",
              _summary_keys_with_content),
    Migration(8, "search indexes scoped by tenant, conversation and role; query words folded once",
              _SEARCH_SCOPE),
    Migration(9, "provider objects owned by the tenant that created them through an operator key",
              _PROVIDER_OBJECTS),
    Migration(10, "identity hashes by meaning (tool arguments by value, cache marks ignored), recomputed",
              _identity_by_meaning),
    Migration(11, "forwarded requests' prefix tokens, billed-input estimates and provider cache reads",
              _FORWARDED_COST),
    # The flag is shared with SQLite's schema; here the tsvector trigger indexes every row at once.
    Migration(12, "a bulk import's messages flagged until indexed (indexed at insert here)",
              "ALTER TABLE messages ADD COLUMN fts_pending SMALLINT NOT NULL DEFAULT 0;\n"
              "CREATE INDEX messages_fts_pending ON messages (id) WHERE fts_pending = 1;\n"),
    Migration(13, "a summary of a long run of messages links them as one id span (store/source_spans.py)",
              _SOURCE_SPANS),
)
_LOCK_KEY = "ctxproxy:migrations"


def _statements(sql: str) -> list[str]:
    """Statements of a migration script (`;` at a line end closes one; dollar-quoted bodies stay whole)."""
    out, pending = [], ""
    for line in sql.splitlines(keepends=True):
        pending += line
        if line.rstrip().endswith(";") and pending.count("$$") % 2 == 0:
            out.append(pending.strip())
            pending = ""
    if pending.strip():
        raise StoreError(f"incomplete SQL statement in migration: {pending.strip()[:80]}")
    return out


def applied_versions(db: Database) -> set[int]:
    """Versions recorded in `schema_migrations` (creating that table if needed)."""
    with db.transaction(_LOCK_KEY):
        db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, "
                   "name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)")
        return {int(r[0]) for r in db.execute("SELECT version FROM schema_migrations")}


def apply_migrations(db: Database, migrations: tuple[Migration, ...] = MIGRATIONS) -> list[int]:
    """Apply the missing migrations in order, each in one transaction; return the versions applied."""
    done = applied_versions(db)
    refuse_newer_schema(done, (m.version for m in migrations))
    applied: list[int] = []
    for migration in sorted(migrations, key=lambda m: m.version):
        if migration.version in done:
            continue
        with db.transaction(_LOCK_KEY):
            if db.execute("SELECT 1 FROM schema_migrations WHERE version = :v",
                          {"v": migration.version}).fetchone():
                continue  # another replica applied it meanwhile
            if callable(migration.sql):
                migration.sql(db)
            else:
                for statement in _statements(migration.sql):
                    db.execute(statement)
            db.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (:v, :n, :t)",
                       {"v": migration.version, "n": migration.name, "t": time.time()})
        applied.append(migration.version)
    return applied
