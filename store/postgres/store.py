"""The PostgreSQL store: the shared backend replicas use (`store.url: postgresql://...`).

`PgStore.for_tenant` hands out the backend-independent TenantStore (store/tenant.py) running over a
`PgTenantConnection`, whose `run` is the one place that binds the tenant; search is its own
(store/postgres/search.py). Every write transaction first takes its conversation's advisory lock
(`_conversation_key`), so writes to one conversation are serialised across processes (READ COMMITTED
then sees the other replica's committed rows) while other conversations proceed; a killed replica's
open transaction is rolled back by the server.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Literal

from config import cache_budget
from config.errors import StoreError
from config.settings import StoreSettings
from store.encoding.identity import canonical_bodies, chain_from_bodies
from store.history.prefix_rows import PrefixRows
from store.models import SearchHit, SearchQuery
from store.postgres import search as pg_search
from store.postgres.db import Database
from store.postgres.migrations import apply_migrations
from store.runner import Cursor
from store.summaries import SourcesCache, sources_cache
from store.tenant import TenantStore, tenant_id

_OWN_CONVERSATION = "SELECT 1 FROM conversations WHERE tenant_id = :tenant AND id = :cid"
_LOCK_KEY_CACHE = 100_000  # conversations whose lock key is remembered (cleared when full)


class _Rollback(Exception):
    """Raised inside a transaction to undo it on purpose (previews)."""


class PgStore:
    """Owns the PostgreSQL connection and the tenant secret; hands out TenantStores."""

    def __init__(self, db: Database, tenant_secret: str, settings: StoreSettings) -> None:
        self.db = db
        self.settings = settings
        self._secret = tenant_secret
        self.lock_keys: dict[tuple[str, str], str] = {}  # (tenant, conversation) -> its lock key
        # stored rows ingest already read (store/history/prefix_rows.py)
        self.prefix_rows = cache_budget.register("prefix_rows", PrefixRows())
        self.summary_sources: SourcesCache = sources_cache()

    @classmethod
    def open(cls, settings: StoreSettings) -> PgStore:
        """Connect, migrate (once across replicas), and load (or create once) the tenant secret."""
        if not settings.url:
            raise StoreError("internal: PgStore.open without store.url")
        db = Database(settings.url)
        try:
            apply_migrations(db)
            secret = settings.tenant_secret or _stored_secret(db)
        except BaseException:
            db.close()
            raise
        return cls(db, secret, settings)

    @property
    def tenant_secret(self) -> str:
        return self._secret

    def tenant_id_for_key(self, api_key: str | None) -> str:
        return tenant_id(self._secret, api_key)

    def for_tenant(self, tenant_id: str) -> TenantStore:
        return TenantStore(PgTenantConnection(self, tenant_id))

    def tenant_ids(self) -> list[str]:
        """Tenants with at least one conversation, most recent activity first (operator views)."""
        found = self.db.execute("SELECT tenant_id FROM conversations GROUP BY tenant_id "
                                "ORDER BY MAX(updated_at) DESC, tenant_id")
        return [str(row[0]) for row in found]

    def checkpoint(self, mode: Literal["PASSIVE", "TRUNCATE"] = "PASSIVE", *,
                   exclusive: bool = False) -> bool:
        """Nothing to do: the server checkpoints its own WAL (always complete)."""
        return True

    def index_pending(self, limit: int) -> int:
        """Clears up to `limit` bulk-import flags (the tsvector trigger indexed those rows at insert)."""
        with self.db.transaction():
            cur = self.db.execute("UPDATE messages SET fts_pending = 0 WHERE id IN (SELECT id FROM messages "
                                  "WHERE fts_pending = 1 ORDER BY id LIMIT :n) RETURNING id", {"n": limit})
            return len(cur.fetchall())

    def size_bytes(self) -> int:
        """Tables and indexes of the store's schema, as PostgreSQL counts them."""
        row = self.db.execute("SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                              "JOIN pg_namespace n ON n.oid = c.relnamespace "
                              "WHERE n.nspname = current_schema() AND c.relkind = 'r'").fetchone()
        return int(row[0]) if row is not None else 0

    def close(self) -> None:
        self.db.close()


def _stored_secret(db: Database) -> str:
    """The secret kept in `meta`, generated on first use (race-safe: first writer wins)."""
    with db.transaction():
        db.execute("INSERT INTO meta (key, value) VALUES ('tenant_secret', :v) ON CONFLICT (key) DO NOTHING",
                   {"v": secrets.token_hex(32)})
        row = db.execute("SELECT value FROM meta WHERE key = 'tenant_secret'").fetchone()
    if row is None:
        raise StoreError("tenant secret missing from the store's meta table")
    return str(row[0])


class PgTenantConnection:
    """One tenant's queries on the PostgreSQL connection, each write under its conversation's lock."""

    def __init__(self, store: PgStore, tenant_id: str) -> None:
        self._pg = store
        self.tenant_id = tenant_id
        self.prefix_rows = store.prefix_rows
        self.summary_sources = store.summary_sources

    def run(self, sql: str, params: dict[str, Any] | None = None, *, plain: bool = False) -> Cursor:
        """Execute with the tenant bound; SQL that does not filter on `:tenant` is a bug. Rows read by
        position either way (`plain` is SQLite's concern)."""
        return self._pg.db.execute(*self._bound(sql, params))

    def run_many(self, sql: str, rows: Sequence[dict[str, Any]]) -> None:
        self._pg.db.execute_many(self._bound(sql)[0], [{**row, "tenant": self.tenant_id} for row in rows])

    def _bound(self, sql: str, params: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        if ":tenant" not in sql:
            raise StoreError("internal: store query without tenant filter")
        return sql, {**(params or {}), "tenant": self.tenant_id}

    @contextmanager
    def transaction(self, conversation_id: str | None = None, *, durable: bool = True) -> Iterator[None]:
        """A write transaction holding the conversation's lock (see `_conversation_key`)."""
        keys = (self._conversation_key(conversation_id),) if conversation_id is not None else ()
        with self._pg.db.transaction(*keys, durable=durable):
            yield

    def _lock_key(self, chain_hash: str) -> str:
        return f"ctxproxy:{self.tenant_id}:{chain_hash}"

    def _conversation_key(self, conversation_id: str) -> str:
        """A conversation's lock: the chain hash of its second message (its first, while it has one).

        Every request continuing the conversation shares that hash, so ingest can take the same lock
        before it knows which conversation it continues; conversations that only share a system
        prompt get different locks and never wait for each other.
        """
        cached = self._pg.lock_keys.get((self.tenant_id, conversation_id))
        if cached is not None:
            return cached
        found = self.run("SELECT seq, chain_hash FROM messages WHERE tenant_id = :tenant AND "
                         "conversation_id = :cid AND seq <= 1 ORDER BY seq DESC LIMIT 1",
                         {"cid": conversation_id}).fetchone()
        key = self._lock_key(found[1] if found is not None else "conversation:" + conversation_id)
        if found is not None and found[0] == 1:  # a stored second message never changes: keep it
            if len(self._pg.lock_keys) >= _LOCK_KEY_CACHE:
                self._pg.lock_keys.clear()
            self._pg.lock_keys[(self.tenant_id, conversation_id)] = key
        return key

    def ingest_transaction(self, messages: Sequence[dict[str, Any]]) -> AbstractContextManager[None]:
        """Ingest under the locks of every conversation a request can extend: its first message's
        chain hash, then its second's (a fixed order: no deadlock)."""
        chain = chain_from_bodies(canonical_bodies(messages[:2])) if messages else []
        return self._pg.db.transaction(*(self._lock_key(h) for h in chain))

    @contextmanager
    def rolled_back(self, conversation_id: str) -> Iterator[None]:
        """A transaction, holding the conversation's lock, undone when the block ends (previews)."""
        try:
            with self.transaction(conversation_id):
                yield
                raise _Rollback
        except _Rollback:
            pass

    def scrub(self) -> None:
        """Deleted rows are dead tuples until (auto)vacuum reclaims them; nothing to do here."""

    def search(self, q: SearchQuery, check: Callable[[str], object]) -> list[SearchHit]:
        """Full-text search (store/postgres/search.py); a named conversation must be this tenant's.

        The conversation check and each scope's statement go in one round trip, under the search's
        planner settings."""
        planned = pg_search.plan(q)
        named = None if q.all_conversations else q.conversation_id
        checks = [(_OWN_CONVERSATION, {"cid": named})] if named else []
        results = self._pg.db.read_many([self._bound(sql, params) for sql, params in
                                         (*checks, *planned.statements)], pg_search.SETTINGS)
        if named and results[0].fetchone() is None:
            check(named)  # raises the store's NotFoundError
        return planned.hits(results[len(checks):])
