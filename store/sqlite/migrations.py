"""Numbered schema migrations, each applied in its own transaction and recorded.

A migration is `(version, name, sql_or_callable)`. SQL is run statement by statement inside the
transaction (never `executescript`, which would commit half-way), so a failing migration leaves
nothing behind and `schema_migrations` only lists what was fully applied. Re-opening is a no-op.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import sqlite_utils

from config.errors import StoreError
from store.encoding import forwarded
from store.interface import refuse_newer_schema
from store.sqlite.transaction import transaction
from store.summaries import dedupe_summaries
from store.upgrades.rehash import rehash_messages

_INITIAL = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE conversations (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    model TEXT NOT NULL,
    external_id TEXT,
    forked_from TEXT,
    message_count INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX conversations_tenant_external ON conversations (tenant_id, external_id, created_at);
CREATE INDEX conversations_tenant_updated ON conversations (tenant_id, updated_at);

CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id),
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    token_count INTEGER NOT NULL,
    chain_hash TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    pinned INTEGER NOT NULL DEFAULT 0,
    source TEXT NOT NULL DEFAULT 'client',
    created_at REAL NOT NULL,
    -- the large columns last: reading the small ones never walks overflow pages
    message_json TEXT NOT NULL,
    text TEXT NOT NULL,
    UNIQUE (conversation_id, seq)
);
CREATE INDEX messages_tenant_chain ON messages (tenant_id, chain_hash, seq, conversation_id);

CREATE TABLE summaries (
    num INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id),
    kind TEXT NOT NULL,
    depth INTEGER NOT NULL,
    generation INTEGER NOT NULL,
    level TEXT NOT NULL,
    content TEXT NOT NULL,
    token_count INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    model TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX summaries_conversation ON summaries (conversation_id, num);

CREATE TABLE summary_sources (
    tenant_id TEXT NOT NULL,
    summary_id TEXT NOT NULL REFERENCES summaries (id),
    source_kind TEXT NOT NULL CHECK (source_kind IN ('message', 'summary')),
    source_id TEXT NOT NULL,
    ord INTEGER NOT NULL,
    PRIMARY KEY (summary_id, ord)
);
CREATE INDEX summary_sources_source ON summary_sources (source_kind, source_id);

CREATE TABLE anchors (
    id INTEGER PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id),
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    source_message_id INTEGER,
    source_seq INTEGER NOT NULL DEFAULT -1,
    status TEXT NOT NULL DEFAULT 'active',
    superseded_by INTEGER,
    created_at REAL NOT NULL
);
CREATE INDEX anchors_lookup ON anchors (conversation_id, kind, key, status);

CREATE TABLE views (
    tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id),
    version INTEGER NOT NULL,
    items_json TEXT NOT NULL,
    covered_through_seq INTEGER NOT NULL,
    anchor_ids_json TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (conversation_id, version)
);

CREATE TABLE compaction_events (
    id INTEGER PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id),
    trigger TEXT NOT NULL,
    tier TEXT NOT NULL,
    level TEXT NOT NULL,
    outcome TEXT NOT NULL,
    summarizer_model TEXT NOT NULL,
    summarizer_settings_json TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    source_message_ids_json TEXT NOT NULL,
    source_summary_ids_json TEXT NOT NULL,
    summary_id TEXT,
    depth INTEGER,
    generation INTEGER,
    tokens_before INTEGER NOT NULL,
    tokens_after INTEGER NOT NULL,
    verification TEXT NOT NULL,
    rejected_facts_json TEXT NOT NULL,
    anchors_added_json TEXT NOT NULL,
    anchors_superseded_json TEXT NOT NULL,
    duration_ms REAL NOT NULL,
    error TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX compaction_events_conversation ON compaction_events (conversation_id, id);

CREATE TABLE forwarded (
    id INTEGER PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id),
    prefix_hashes_json TEXT NOT NULL,
    tokens_received INTEGER NOT NULL,
    tokens_forwarded INTEGER NOT NULL,
    budget INTEGER NOT NULL,
    occupancy_json TEXT NOT NULL,
    compacted INTEGER NOT NULL,
    view_version INTEGER NOT NULL,
    extends_previous INTEGER,
    created_at REAL NOT NULL
);
CREATE INDEX forwarded_conversation ON forwarded (conversation_id, id);

CREATE TABLE tool_rounds (
    id INTEGER PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id),
    calls_json TEXT NOT NULL,
    results_json TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX tool_rounds_conversation ON tool_rounds (conversation_id, id);
"""


def _fts_pair(corpus: str, table: str, column: str, rowid: str, scope: str) -> str:
    """A unicode61 index (words, bm25) and a trigram index (substrings, CJK), kept in sync by triggers.

    The unicode61 index has a second column `scope`: hex-encoded tenant, conversation (and role)
    tokens, so a conversation- or tenant-scoped search is intersected inside FTS5 instead of joining
    every match. Its content is a view computing `scope` from the row; triggers use the same expression.
    """
    new_scope, old_scope = scope.format(r="new"), scope.format(r="old")
    return f"""
CREATE VIEW {corpus}_fts_src AS SELECT {rowid}, {column}, {scope.format(r=table)} AS scope FROM {table};
CREATE VIRTUAL TABLE {corpus}_fts USING fts5 (
    {column}, scope, content='{corpus}_fts_src', content_rowid='{rowid}',
    tokenize='unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE {corpus}_tri USING fts5 (
    {column}, content='{table}', content_rowid='{rowid}', tokenize='trigram');
CREATE TRIGGER {table}_fts_ai AFTER INSERT ON {table} BEGIN
    INSERT INTO {corpus}_fts (rowid, {column}, scope) VALUES (new.{rowid}, new.{column}, {new_scope});
    INSERT INTO {corpus}_tri (rowid, {column}) VALUES (new.{rowid}, new.{column});
END;
CREATE TRIGGER {table}_fts_ad AFTER DELETE ON {table} BEGIN
    INSERT INTO {corpus}_fts ({corpus}_fts, rowid, {column}, scope)
        VALUES ('delete', old.{rowid}, old.{column}, {old_scope});
    INSERT INTO {corpus}_tri ({corpus}_tri, rowid, {column}) VALUES ('delete', old.{rowid}, old.{column});
END;
CREATE TRIGGER {table}_fts_au AFTER UPDATE OF {column} ON {table} BEGIN
    INSERT INTO {corpus}_fts ({corpus}_fts, rowid, {column}, scope)
        VALUES ('delete', old.{rowid}, old.{column}, {old_scope});
    INSERT INTO {corpus}_tri ({corpus}_tri, rowid, {column}) VALUES ('delete', old.{rowid}, old.{column});
    INSERT INTO {corpus}_fts (rowid, {column}, scope) VALUES (new.{rowid}, new.{column}, {new_scope});
    INSERT INTO {corpus}_tri (rowid, {column}) VALUES (new.{rowid}, new.{column});
END;
"""


# Scope tokens (see store/sqlite/search.py `scope_tokens`): 't' + hex(tenant), 'c' + hex(conversation),
# 'r' + hex(role); hex keeps any id a single unicode61 token.
_MESSAGE_SCOPE = "'t' || hex({r}.tenant_id) || ' c' || hex({r}.conversation_id) || ' r' || hex({r}.role)"
_SUMMARY_SCOPE = "'t' || hex({r}.tenant_id) || ' c' || hex({r}.conversation_id)"
_SEARCH = (_fts_pair("messages", "messages", "text", "id", _MESSAGE_SCOPE)
           + _fts_pair("summaries", "summaries", "content", "num", _SUMMARY_SCOPE))

_FORWARDED_V3 = """
CREATE TABLE forwarded_v3 (
    id INTEGER PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id),
    messages_forwarded INTEGER NOT NULL,
    shared_prefix INTEGER NOT NULL,
    extends_previous INTEGER,
    tokens_received INTEGER NOT NULL,
    tokens_forwarded INTEGER NOT NULL,
    budget INTEGER NOT NULL,
    occupancy_json TEXT NOT NULL,
    compacted INTEGER NOT NULL,
    view_version INTEGER NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE forwarded_tips (
    conversation_id TEXT PRIMARY KEY REFERENCES conversations (id),
    tenant_id TEXT NOT NULL,
    hashes BLOB NOT NULL
);
"""
_FORWARDED_COPY = ("INSERT INTO forwarded_v3 (id, tenant_id, conversation_id, messages_forwarded, "
                   "shared_prefix, extends_previous, tokens_received, tokens_forwarded, budget, "
                   "occupancy_json, compacted, view_version, created_at) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


def _forwarded_in_constant_space(conn: sqlite3.Connection) -> None:
    """Migration 3: per-request counts instead of every message hash (store/encoding/forwarded.py); each
    conversation's newest hashes become its tip."""
    for statement in split_statements(_FORWARDED_V3):
        conn.execute(statement)
    tips: dict[str, tuple[str, bytes]] = {}
    old = conn.execute("SELECT id, tenant_id, conversation_id, prefix_hashes_json, tokens_received, "
                       "tokens_forwarded, budget, occupancy_json, compacted, view_version, created_at "
                       "FROM forwarded ORDER BY id")
    for row in old:
        hashes = json.loads(row[3])
        packed = forwarded.pack(hashes)
        previous = tips.get(row[2])
        shared, extends = forwarded.compare(previous[1] if previous else None, packed)
        conn.execute(_FORWARDED_COPY, (row[0], row[1], row[2], len(hashes), shared,
                                       None if extends is None else int(extends), *row[4:]))
        tips[row[2]] = (row[1], packed)
    conn.executemany("INSERT INTO forwarded_tips (conversation_id, tenant_id, hashes) VALUES (?, ?, ?)",
                     [(cid, tenant, packed) for cid, (tenant, packed) in tips.items()])
    conn.execute("DROP TABLE forwarded")
    conn.execute("ALTER TABLE forwarded_v3 RENAME TO forwarded")
    conn.execute("CREATE INDEX forwarded_conversation ON forwarded (conversation_id, id)")


def _summary_source_keys(conn: sqlite3.Connection) -> None:
    """Migration 5: every summary keyed by what it replaces (store/summaries.py), duplicates folded
    into their oldest copy, then the key made unique per conversation."""
    conn.execute("ALTER TABLE summaries ADD COLUMN source_key TEXT")
    dedupe_summaries(conn.execute)
    conn.execute("CREATE UNIQUE INDEX summaries_source_key ON summaries (conversation_id, source_key)")


def _summary_keys_with_content(conn: sqlite3.Connection) -> None:
    """Migration 7: every summary re-keyed with its content (store/summaries.py); only exact
    duplicates fold, which the key had already kept out."""
    dedupe_summaries(conn.execute)


def _identity_by_meaning(conn: sqlite3.Connection) -> None:
    """Migration 9: identity hashes recomputed (store/upgrades/rehash.py): tool arguments hashed by their JSON
    value, per-request marks ignored, so stored conversations are still found by their resends."""
    rehash_messages(conn.execute)


# Pinned messages are few: a partial index answers "which of this conversation's are pinned" at once.
_PINNED = "CREATE INDEX messages_pinned ON messages (conversation_id, seq) WHERE pinned = 1;"

# Provider objects (files, responses, batches, ...) a tenant created through an operator-keyed entry.
_PROVIDER_OBJECTS = """
CREATE TABLE provider_objects (
    tenant_id TEXT NOT NULL,
    object_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (tenant_id, object_id)
);
"""

# What each forwarded request cost: its shared prefix in tokens, the full history's, both billed-input
# estimates, the provider's reported cache reads; the tip keeps the received history's hashes too.
_FORWARDED_COST = """
ALTER TABLE forwarded ADD COLUMN prefix_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE forwarded ADD COLUMN full_prefix_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE forwarded ADD COLUMN billed_input_estimate INTEGER NOT NULL DEFAULT 0;
ALTER TABLE forwarded ADD COLUMN full_history_billed_estimate INTEGER NOT NULL DEFAULT 0;
ALTER TABLE forwarded ADD COLUMN cache_read_tokens INTEGER;
ALTER TABLE forwarded_tips ADD COLUMN received_hashes BLOB;
ALTER TABLE forwarded_tips ADD COLUMN tools_digests BLOB;
"""

def _deferred_message_index() -> str:
    """Migration 11: a message stored with `fts_pending = 1` (a bulk import) is left out of the search
    indexes until the flag is cleared, which indexes it (store `index_pending`, in slices); the
    delete and update triggers skip a row that was never indexed (an external-content FTS5 index
    must not be told to delete what it does not hold)."""
    new, old = _MESSAGE_SCOPE.format(r="new"), _MESSAGE_SCOPE.format(r="old")
    add = (f"INSERT INTO messages_fts (rowid, text, scope) VALUES (new.id, new.text, {new});\n"
           "    INSERT INTO messages_tri (rowid, text) VALUES (new.id, new.text);")
    drop = (f"INSERT INTO messages_fts (messages_fts, rowid, text, scope) "
            f"VALUES ('delete', old.id, old.text, {old});\n"
            "    INSERT INTO messages_tri (messages_tri, rowid, text) VALUES ('delete', old.id, old.text);")
    return f"""
ALTER TABLE messages ADD COLUMN fts_pending INTEGER NOT NULL DEFAULT 0;
CREATE INDEX messages_fts_pending ON messages (id) WHERE fts_pending = 1;
DROP TRIGGER messages_fts_ai;
DROP TRIGGER messages_fts_ad;
DROP TRIGGER messages_fts_au;
CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages WHEN new.fts_pending = 0 BEGIN
    {add}
END;
CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages WHEN old.fts_pending = 0 BEGIN
    {drop}
END;
CREATE TRIGGER messages_fts_au AFTER UPDATE OF text ON messages
WHEN old.fts_pending = 0 AND new.fts_pending = 0 BEGIN
    {drop}
    {add}
END;
CREATE TRIGGER messages_fts_indexed AFTER UPDATE OF fts_pending ON messages
WHEN old.fts_pending = 1 AND new.fts_pending = 0 BEGIN
    {add}
END;
"""


_SOURCE_SPANS = """
CREATE TABLE summary_source_spans (
    summary_id TEXT PRIMARY KEY REFERENCES summaries (id),
    tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    first_id INTEGER NOT NULL,
    last_id INTEGER NOT NULL
);
CREATE INDEX summary_source_spans_conversation ON summary_source_spans (conversation_id);
"""


Step = str | Callable[[sqlite3.Connection], None]


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    step: Step


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", _INITIAL),
    Migration(2, "fts5 indexes (unicode61 + trigram) kept in sync by triggers", _SEARCH),
    Migration(3, "forwarded log in constant space per request, newest hashes as a tip",
              _forwarded_in_constant_space),
    Migration(4, "leases on background compaction steps (one process per step)", """
CREATE TABLE step_leases (
    tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    holder TEXT NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (tenant_id, conversation_id)
);
"""),
    Migration(5, "a summary of the same sources stored once per conversation (unique source key)",
              _summary_source_keys),
    Migration(6, "pinned messages indexed (ingest reads a resent history's pins, not its rows)",
              _PINNED),
    Migration(7, "a summary's key covers its content (a tighter re-summary is a summary of its own)",
              _summary_keys_with_content),
    Migration(8, "provider objects owned by the tenant that created them through an operator key",
              _PROVIDER_OBJECTS),
    Migration(9, "identity hashes by meaning (tool arguments by value, cache marks ignored), recomputed",
              _identity_by_meaning),
    Migration(10, "forwarded requests' prefix tokens, billed-input estimates and provider cache reads",
              _FORWARDED_COST),
    Migration(11, "a bulk import's messages indexed for search after the request, in slices",
              _deferred_message_index()),
    Migration(12, "a summary of a long run of messages links them as one id span (store/source_spans.py)",
              _SOURCE_SPANS),
)


def split_statements(sql: str) -> Iterator[str]:
    """Complete SQL statements of a script (trigger bodies keep their inner semicolons)."""
    pending = ""
    for line in sql.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            if pending.strip():
                yield pending.strip()
            pending = ""
    if pending.strip():
        raise StoreError(f"incomplete SQL statement in migration: {pending.strip()[:80]}")


def applied_versions(conn: sqlite3.Connection) -> set[int]:
    """Versions recorded in `schema_migrations` (creating that table if needed)."""
    table = sqlite_utils.Database(conn).table("schema_migrations")
    table.create({"version": int, "name": str, "applied_at": float}, pk="version",
                 not_null={"name", "applied_at"}, if_not_exists=True)
    return {int(row["version"]) for row in table.rows}


def apply_migrations(conn: sqlite3.Connection, migrations: Sequence[Migration] = MIGRATIONS) -> list[int]:
    """Apply the missing migrations in order, each in one transaction; return the versions applied."""
    done = applied_versions(conn)
    refuse_newer_schema(done, (m.version for m in migrations))
    applied: list[int] = []
    for migration in sorted(migrations, key=lambda m: m.version):
        if migration.version in done:
            continue
        try:
            with transaction(conn):
                if conn.execute("SELECT 1 FROM schema_migrations WHERE version = ?",
                                (migration.version,)).fetchone():
                    continue  # another process applied it meanwhile
                _run_step(conn, migration.step)
                conn.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                             (migration.version, migration.name, time.time()))
        except sqlite3.Error as exc:
            raise StoreError(f"migration {migration.version} ({migration.name}) failed: {exc}") from exc
        applied.append(migration.version)
    return applied


def _run_step(conn: sqlite3.Connection, step: Step) -> None:
    if callable(step):
        step(conn)
        return
    for statement in split_statements(step):
        conn.execute(statement)
