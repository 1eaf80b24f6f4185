"""Inspector test helpers: keys, the populated store, and the real app (create_app) serving /ui.

Kept out of conftest.py so test modules can import them by a unique module name."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from pytest_aiohttp import AiohttpServer

from config.settings import LiteLLMParams, ModelEntry, ServerSettings, Settings, StoreSettings
from store.sqlite.store import Store
from tests.fakes.engine import UnusedEngine
from tests.proxy.inspector.inspect_scenario import MODEL, Scenario, count_tokens, populate

API_KEY = "sk-inspect-tenant-a-0123456789"
OTHER_KEY = "sk-inspect-tenant-b-0123456789"
ADMIN_KEY = "admin-key-for-tests-0123456789"


@dataclass(frozen=True)
class Populated:
    db_path: Path
    scenario: Scenario
    other_tenant: str
    other_conversation: str


@pytest.fixture
def populated(tmp_path: Path) -> Populated:
    """Write the scenario for tenant A and a two-message conversation for tenant B, then close."""
    db_path = tmp_path / "data" / "ctxproxy.db"
    store = Store.open(StoreSettings(path=str(db_path)))
    try:
        tenant_a = store.tenant_id_for_key(API_KEY)
        scenario = populate(store.for_tenant(tenant_a), tenant_a)
        tenant_b = store.tenant_id_for_key(OTHER_KEY)
        other = store.for_tenant(tenant_b).ingest(
            [{"role": "user", "content": "Tenant B secret plan: zebra"},
             {"role": "assistant", "content": "ok"}],
            model=MODEL, external_id=None, count_tokens=count_tokens)
    finally:
        store.close()
    return Populated(db_path, scenario, tenant_b, other.conversation.id)


def ui_settings(db_path: Path, admin_key: str | None) -> Settings:
    model = ModelEntry("gpt-4o-mini", LiteLLMParams("openai/gpt-4o-mini", "http://127.0.0.1:9/v1"), 128_000)
    return Settings(model_list=(model,), store=StoreSettings(path=str(db_path)),
                    server=replace(ServerSettings(), admin_key=admin_key))


def build_app(settings: Settings) -> web.Application:
    """create_app with an engine stand-in: the inspector only reads the store."""
    from proxy.app import create_app

    return create_app(settings, engine_factory=lambda *args: UnusedEngine())



# What pytest-aiohttp's `aiohttp_client(server)` returns for a started TestServer.
UiClient = TestClient[web.Request, None]


class UiServerFactory(Protocol):
    """The `make_ui_server` fixture: a started TestServer over the populated store."""

    def __call__(self, admin_key: str | None = ADMIN_KEY) -> Awaitable[TestServer]: ...


@pytest.fixture
def make_ui_server(aiohttp_server: AiohttpServer, populated: Populated) -> UiServerFactory:
    async def factory(admin_key: str | None = ADMIN_KEY) -> TestServer:
        return await aiohttp_server(build_app(ui_settings(populated.db_path, admin_key)))

    return factory
