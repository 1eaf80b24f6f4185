"""The test PostgreSQL server: one throw-away database per test session, one schema per test.

`CTXPROXY_TEST_PG_URL` names the server (default: the local one, trust auth), read when this module is
first imported (tests/conftest.py imports it before the env is isolated). Tests that need it skip
with a clear message only when no server answers; the session database is dropped at the end.
"""

from __future__ import annotations

import os
import secrets
from urllib.parse import quote

import psycopg

SERVER_URL = os.environ.get("CTXPROXY_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
SKIP_REASON = f"no PostgreSQL server answers at {SERVER_URL} (set CTXPROXY_TEST_PG_URL)"


def server_answers() -> bool:
    """True when the server accepts a connection within two seconds."""
    try:
        psycopg.connect(SERVER_URL, connect_timeout=2).close()
    except psycopg.Error:
        return False
    return True


def _url_for(database: str) -> str:
    base = SERVER_URL.rsplit("/", 1)[0]
    return f"{base}/{database}"


def create_database() -> str:
    """A new database with the store's extensions installed in `public`; returns its URL."""
    name = "ctxproxy_test_" + secrets.token_hex(6)
    with psycopg.connect(SERVER_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    with psycopg.connect(_url_for(name), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")
        conn.execute("CREATE EXTENSION IF NOT EXISTS unaccent SCHEMA public")
        conn.execute("CREATE EXTENSION IF NOT EXISTS btree_gin SCHEMA public")
    return _url_for(name)


def drop_database(url: str) -> None:
    name = url.rsplit("/", 1)[1].split("?")[0]
    with psycopg.connect(SERVER_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def create_schema(database_url: str) -> str:
    """A new schema in the session database; returns a store URL whose search_path starts there."""
    schema = "s_" + secrets.token_hex(6)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return f"{database_url}?options={quote(f'-csearch_path={schema},public')}"


def drop_schema(store_url: str) -> None:
    database_url, _, options = store_url.partition("?")
    schema = options.split("search_path%3D", 1)[1].split("%2C", 1)[0]
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
