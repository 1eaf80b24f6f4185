"""Fixtures for store tests: every test runs on SQLite (a real file) and on PostgreSQL (own schema).

Two tenants and history builders. The PostgreSQL run skips with a clear message when no server answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from config.settings import StoreSettings
from store.interface import StoreBackend, TenantAccess
from store.postgres.store import PgStore
from store.sqlite.store import Store
from tests.store.store_helpers import TokenCounter


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreBackend]:
    s: StoreBackend
    if request.param == "sqlite":
        s = Store.open(StoreSettings(path=str(tmp_path / "data" / "ctxproxy.db")))
    else:
        s = PgStore.open(StoreSettings(url=request.getfixturevalue("pg_url")))
    yield s
    s.close()


@pytest.fixture
def alice(store: StoreBackend) -> TenantAccess:
    return store.for_tenant(store.tenant_id_for_key("sk-alice"))


@pytest.fixture
def bob(store: StoreBackend) -> TenantAccess:
    return store.for_tenant(store.tenant_id_for_key("sk-bob"))


@pytest.fixture
def counter() -> TokenCounter:
    return TokenCounter()
