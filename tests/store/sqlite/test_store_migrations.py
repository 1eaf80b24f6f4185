"""Migrations: idempotent, recorded, all-or-nothing; database opened with the expected pragmas."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from config.errors import StoreError
from config.settings import StoreSettings
from store.sqlite.db import open_database
from store.sqlite.migrations import MIGRATIONS, Migration, apply_migrations
from store.sqlite.store import Store


def test_open_creates_parent_dir_and_sets_pragmas(tmp_path: Path) -> None:
    db = open_database(str(tmp_path / "a" / "b" / "x.db"), busy_timeout_ms=1234)
    conn = db.conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 1234
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    conn.close()


def test_migrations_recorded_once_and_reopen_is_noop(tmp_path: Path) -> None:
    path = str(tmp_path / "x.db")
    db = open_database(path, 1000)
    rows = db.conn.execute("SELECT version, name, applied_at FROM schema_migrations "
                           "ORDER BY version").fetchall()
    assert [r[0] for r in rows] == [m.version for m in MIGRATIONS]
    assert all(r[1] and r[2] > 0 for r in rows)
    db.conn.close()
    db = open_database(path, 1000)
    assert apply_migrations(db.conn) == []
    assert db.conn.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0] == len(MIGRATIONS)
    for table in ("meta", "conversations", "messages", "summaries", "summary_sources", "anchors", "views",
                  "compaction_events", "forwarded", "tool_rounds", "messages_fts", "messages_tri"):
        assert db[table].exists(), table
    db.conn.close()


def test_failing_migration_leaves_nothing_half_applied(tmp_path: Path) -> None:
    db = open_database(str(tmp_path / "x.db"), 1000)
    broken = Migration(99, "broken",
                       "CREATE TABLE half_done (x INTEGER);\nINSERT INTO no_such_table VALUES (1);")
    with pytest.raises(StoreError, match="migration 99"):
        apply_migrations(db.conn, [*MIGRATIONS, broken])
    assert not db["half_done"].exists()
    assert db.conn.execute("SELECT COUNT(*) FROM schema_migrations WHERE version = 99").fetchone()[0] == 0
    assert not db.conn.in_transaction


def test_callable_migration_runs_in_transaction(tmp_path: Path) -> None:
    db = open_database(str(tmp_path / "x.db"), 1000)

    def step(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE extra (x INTEGER)")
        raise sqlite3.OperationalError("boom")

    with pytest.raises(StoreError):
        apply_migrations(db.conn, [Migration(50, "callable", step)])
    assert not db["extra"].exists()


def test_tenant_secret_generated_once_and_kept(tmp_path: Path) -> None:
    settings = StoreSettings(path=str(tmp_path / "x.db"))
    first = Store.open(settings)
    secret, tenant = first.tenant_secret, first.tenant_id_for_key("sk-1")
    first.close()
    second = Store.open(settings)
    assert second.tenant_secret == secret and len(secret) == 64
    assert second.tenant_id_for_key("sk-1") == tenant and len(tenant) == 32
    assert second.tenant_id_for_key(None) == "anonymous"
    assert second.tenant_id_for_key("sk-2") != tenant
    second.close()


def test_configured_tenant_secret_wins(tmp_path: Path) -> None:
    a = Store.open(StoreSettings(path=str(tmp_path / "a.db"), tenant_secret="s3cret"))
    b = Store.open(StoreSettings(path=str(tmp_path / "b.db"), tenant_secret="s3cret"))
    assert a.tenant_secret == "s3cret"
    assert a.tenant_id_for_key("k") == b.tenant_id_for_key("k")
    a.close()
    b.close()


def test_api_key_never_stored(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    s = Store.open(StoreSettings(path=str(path)))
    t = s.for_tenant(s.tenant_id_for_key("sk-live-very-secret-key"))
    t.ingest([{"role": "user", "content": "hi"}], model="m", external_id=None, count_tokens=lambda m: 1)
    s.close()
    for f in tmp_path.iterdir():
        assert b"sk-live-very-secret-key" not in f.read_bytes()


def test_a_database_newer_than_the_code_is_refused_naming_both_versions(tmp_path: Path) -> None:
    path = str(tmp_path / "future.db")
    Store.open(StoreSettings(path=path)).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'future', 0)")
    conn.commit()
    conn.close()
    newest = max(m.version for m in MIGRATIONS)
    with pytest.raises(StoreError) as info:
        Store.open(StoreSettings(path=path))
    assert info.value.code == "store_schema_too_new"
    assert "version 99" in info.value.message and f"schema version {newest}" in info.value.message
