"""Fixtures for store tests: a real SQLite file per test, two tenants, and history builders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from config.settings import StoreSettings
from store.store import Store, TenantStore
from tests.store.store_helpers import TokenCounter


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(StoreSettings(path=str(tmp_path / "data" / "ctxproxy.db")))
    yield s
    s.close()


@pytest.fixture
def alice(store: Store) -> TenantStore:
    return store.for_tenant(store.tenant_id_for_key("sk-alice"))


@pytest.fixture
def bob(store: Store) -> TenantStore:
    return store.for_tenant(store.tenant_id_for_key("sk-bob"))


@pytest.fixture
def counter() -> TokenCounter:
    return TokenCounter()
