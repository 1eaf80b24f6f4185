"""The SQLite store: one connection (`Store`) and each tenant's queries on it (`SqliteTenantConnection`).

`Store.for_tenant` hands out the backend-independent TenantStore (store/tenant.py) running over a
`SqliteTenantConnection`: the store's lock, explicit transactions (store/sqlite/transaction.py), FTS5
search (store/sqlite/search.py), and scrubbing after a delete (merged indexes, an emptied WAL).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import sqlite_utils

from config import cache_budget
from config.errors import StoreError
from config.fair_lock import FairRLock
from config.settings import StoreSettings
from store.history.prefix_rows import PrefixRows
from store.models import SearchHit, SearchQuery
from store.runner import Cursor, Result
from store.sqlite import search as search_mod
from store.sqlite.db import (
    FTS_INDEXES,
    MAX_MERGE_STEPS,
    TRUNCATE_RETRY_S,
    TRUNCATE_TRIES,
    CheckpointMode,
    checkpoint,
    merge_step,
    open_database,
    run_checkpoint,
)
from store.sqlite.transaction import transaction
from store.summaries import SourcesCache, sources_cache
from store.tenant import TenantStore, tenant_id

PENDING_INDEXED = ("UPDATE messages SET fts_pending = 0 WHERE id IN "
                   "(SELECT id FROM messages WHERE fts_pending = 1 ORDER BY id LIMIT ?)")


class _Rollback(Exception):
    """Raised inside a transaction to undo it on purpose (previews)."""


class Store:
    """Owns the connection, the tenant secret, and hands out TenantStores."""

    def __init__(self, db: sqlite_utils.Database, tenant_secret: str, settings: StoreSettings) -> None:
        self.db = db
        self.settings = settings
        self.conn: sqlite3.Connection = db.conn
        self.lock = FairRLock()  # engine threads take turns (config/fair_lock.py)
        self._secret = tenant_secret
        # stored rows ingest already read (store/history/prefix_rows.py)
        self.prefix_rows = cache_budget.register("prefix_rows", PrefixRows())
        self.summary_sources: SourcesCache = sources_cache()

    @classmethod
    def open(cls, settings: StoreSettings, *, autocheckpoint: bool = True) -> Store:
        """Open or create the database, migrate it, and load (or create once) the tenant secret.

        A server passes `autocheckpoint=False` and calls `checkpoint()` periodically off the loop.
        """
        db = open_database(settings.path, settings.busy_timeout_ms, autocheckpoint=autocheckpoint,
                           cache_mib=settings.cache_mib, mmap_mib=settings.mmap_mib)
        secret = settings.tenant_secret or _stored_secret(db.conn)
        return cls(db, secret, settings)

    def checkpoint(self, mode: CheckpointMode = "PASSIVE", *, exclusive: bool = False) -> bool:
        """Fold the WAL into the database file (thread-safe); True when complete (TRUNCATE also
        empties the WAL file). `exclusive` runs it on the serving connection under the store's
        lock, so no writer of this process can starve it (they wait for it instead)."""
        if not exclusive or self.settings.path == ":memory:":
            return checkpoint(self.settings.path, self.settings.busy_timeout_ms, mode)
        with self.lock:
            return run_checkpoint(self.conn, mode)

    def index_pending(self, limit: int) -> int:
        """Up to `limit` messages a bulk import stored unindexed, indexed now (clearing the flag fires
        the index triggers, store/sqlite/migrations.py); how many: one bounded transaction."""
        with self.lock, transaction(self.conn):
            return self.conn.execute(PENDING_INDEXED, (limit,)).rowcount

    def scrub(self) -> bool:
        """After a delete: merge the search indexes (dropping deleted entries) in bounded steps,
        each its own transaction, then empty the WAL, so the deleted text is in no file; True when
        the WAL was emptied. The TRUNCATE runs on the serving connection under the store's lock and
        is tried again while another connection's checkpoint (the periodic one, a worker's) holds
        the checkpoint lock: SQLite then answers busy at once, without waiting."""
        for index in FTS_INDEXES:
            for _ in range(MAX_MERGE_STEPS):
                with self.lock, transaction(self.conn):
                    if not merge_step(self.conn, index):
                        break
        for _ in range(TRUNCATE_TRIES):
            if self.checkpoint("TRUNCATE", exclusive=True):
                return True
            time.sleep(TRUNCATE_RETRY_S)
        return False

    def close(self) -> None:
        with self.lock:
            self.conn.close()

    def size_bytes(self) -> int:
        """The database file plus its WAL and shared-memory files, as on disk now."""
        total = 0
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                total += os.path.getsize(self.settings.path + suffix)
        return total

    @property
    def tenant_secret(self) -> str:
        return self._secret

    def tenant_id_for_key(self, api_key: str | None) -> str:
        return tenant_id(self._secret, api_key)

    def for_tenant(self, tenant_id: str) -> TenantStore:
        return TenantStore(SqliteTenantConnection(self, tenant_id))

    def tenant_ids(self) -> list[str]:
        """Tenants with at least one conversation, most recent activity first (operator views)."""
        with self.lock, store_errors():
            found = self.conn.execute("SELECT tenant_id FROM conversations GROUP BY tenant_id "
                                      "ORDER BY MAX(updated_at) DESC, tenant_id").fetchall()
        return [str(row[0]) for row in found]


def _stored_secret(conn: sqlite3.Connection) -> str:
    """The secret kept in `meta`, generated on first use (race-safe: first writer wins)."""
    with transaction(conn):
        conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('tenant_secret', ?)",
                     (secrets.token_hex(32),))
        row = conn.execute("SELECT value FROM meta WHERE key = 'tenant_secret'").fetchone()
    return str(row[0])



@contextmanager
def store_errors() -> Iterator[None]:
    """sqlite3 errors (IntegrityError included) as StoreError: never a raw sqlite3 exception."""
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreError(f"store query failed ({type(exc).__name__}): {exc}") from exc


class SqliteTenantConnection:
    """One tenant's queries on the store's one connection, under its lock (store/tenant.py runs them)."""

    def __init__(self, store: Store, tenant_id: str) -> None:
        self._store = store
        self.tenant_id = tenant_id
        self.prefix_rows = store.prefix_rows
        self.summary_sources = store.summary_sources

    def run(self, sql: str, params: dict[str, Any] | None = None, *, plain: bool = False) -> Cursor:
        """Execute with the tenant bound; SQL that does not filter on `:tenant` is a bug."""
        bound = self._bound(sql, params)
        with self._store.lock, store_errors():  # rows read whole under the lock (store/runner.py Result)
            cur = self._store.conn.cursor()
            cur.row_factory = None if plain else sqlite3.Row
            cur.execute(sql, bound)
            return Result(cur.fetchall(), cur.lastrowid)

    def run_many(self, sql: str, rows: Sequence[dict[str, Any]]) -> None:
        bound = [self._bound(sql, row) for row in rows]
        with self._store.lock, store_errors():
            self._store.conn.executemany(sql, bound)

    def _bound(self, sql: str, params: dict[str, Any] | None) -> dict[str, Any]:
        if ":tenant" not in sql:
            raise StoreError("internal: store query without tenant filter")
        return {**(params or {}), "tenant": self.tenant_id}

    @contextmanager
    def transaction(self, conversation_id: str | None = None, *, durable: bool = True) -> Iterator[None]:
        """One write transaction (SQLite serialises every write anyway, whatever `conversation_id`;
        its WAL at synchronous=NORMAL never waits for a flush, whatever `durable`)."""
        with self._store.lock, transaction(self._store.conn):
            yield

    def ingest_transaction(self, messages: Sequence[dict[str, Any]]) -> AbstractContextManager[None]:
        """A plain write transaction: SQLite serialises every write, whatever `messages` continue."""
        return self.transaction()

    @contextmanager
    def rolled_back(self, conversation_id: str) -> Iterator[None]:
        """A transaction undone when the block ends (previews), under the store's lock throughout."""
        with self._store.lock:
            try:
                with self.transaction(conversation_id):
                    yield
                    raise _Rollback
            except _Rollback:
                pass

    def scrub(self) -> None:
        """Leave no deleted text in the store's files (Store.scrub)."""
        self._store.scrub()

    def search(self, q: SearchQuery, check: Callable[[str], object]) -> list[SearchHit]:
        """FTS5 search (store/sqlite/search.py), the named conversation checked first."""
        if q.conversation_id and not q.all_conversations:
            check(q.conversation_id)
        return search_mod.search(self.run, self.tenant_id, q)
