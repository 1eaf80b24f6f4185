"""PostgreSQL migrations: numbered, recorded once, applied once when replicas start together."""

from __future__ import annotations

import threading

import pytest

from config.errors import StoreError
from config.settings import StoreSettings
from store.postgres.db import Database
from store.postgres.migrations import MIGRATIONS, Migration, apply_migrations
from store.postgres.store import PgStore


def test_replicas_starting_together_apply_each_migration_once(pg_url: str) -> None:
    errors: list[BaseException] = []

    def start() -> None:
        try:
            PgStore.open(StoreSettings(url=pg_url)).close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    db = Database(pg_url)
    versions = [r[0] for r in db.execute("SELECT version FROM schema_migrations ORDER BY version")]
    assert versions == [m.version for m in MIGRATIONS]
    assert apply_migrations(db) == []  # re-opening is a no-op
    db.close()


def test_one_tenant_secret_for_every_replica(pg_url: str) -> None:
    a, b = PgStore.open(StoreSettings(url=pg_url)), PgStore.open(StoreSettings(url=pg_url))
    assert a.tenant_id_for_key("sk-x") == b.tenant_id_for_key("sk-x") != a.tenant_id_for_key("sk-y")
    a.close()
    b.close()


def test_failing_migration_leaves_nothing_half_applied(pg_url: str) -> None:
    PgStore.open(StoreSettings(url=pg_url)).close()
    db = Database(pg_url)
    broken = Migration(99, "broken", "CREATE TABLE half (x INTEGER);\nCREATE TABLE half (x INTEGER);\n")
    with pytest.raises(StoreError):
        apply_migrations(db, (*MIGRATIONS, broken))
    assert db.execute("SELECT to_regclass('half') IS NULL").fetchone()[0] is True
    assert db.execute("SELECT COUNT(*) FROM schema_migrations WHERE version = 99").fetchone()[0] == 0
    db.close()


def test_a_schema_newer_than_the_code_is_refused(pg_url: str) -> None:
    PgStore.open(StoreSettings(url=pg_url)).close()
    db = Database(pg_url)
    db.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)")
    db.close()
    with pytest.raises(StoreError, match="newer than this ctxproxy"):
        PgStore.open(StoreSettings(url=pg_url))


def test_no_server_is_a_store_error_naming_it() -> None:
    with pytest.raises(StoreError, match="cannot open the PostgreSQL store"):
        PgStore.open(StoreSettings(url="postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"))


def test_a_dropped_connection_fails_one_statement_and_the_next_reconnects(pg_url: str) -> None:
    store = PgStore.open(StoreSettings(url=pg_url))
    tenant = store.for_tenant(store.tenant_id_for_key("sk-x"))
    pid = store.db.execute("SELECT pg_backend_pid()").fetchone()[0]
    killer = Database(pg_url)
    killer.execute("SELECT pg_terminate_backend(:pid)", {"pid": pid})  # a server restart, as seen by us
    killer.close()
    with pytest.raises(StoreError):
        tenant.list_conversations()
    assert tenant.list_conversations() == []  # reconnected
    assert store.db.execute("SELECT pg_backend_pid()").fetchone()[0] != pid
    store.close()
