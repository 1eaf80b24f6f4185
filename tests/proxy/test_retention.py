"""store.retention_days: the app's sweep deletes conversations idle longer, and only those."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from config.errors import ConfigError
from config.loader import load_settings
from config.settings import StoreSettings
from proxy import appkeys
from proxy.upkeep import expire_idle
from store.factory import open_store
from store.interface import StoreBackend
from store.sqlite.store import Store
from tests.conftest import ProxyFactory, proxy_settings_for
from tests.fakes.upstream import FakeUpstream
from tests.store.lifecycle_helpers import marked_conversation, store_holds
from tests.store.store_helpers import sql

DAY = 86_400.0


def _age(store: StoreBackend, cid: str, days: float) -> None:
    sql(store, "UPDATE conversations SET updated_at = ? WHERE id = ?", (time.time() - days * DAY, cid))


def test_expire_idle_sweeps_every_tenant(tmp_path: Path) -> None:
    store = Store.open(StoreSettings(path=str(tmp_path / "s.db")))
    try:
        old_a = marked_conversation(store.for_tenant("a"), "OldAlpha1")
        old_b = marked_conversation(store.for_tenant("b"), "OldBeta2")
        recent = marked_conversation(store.for_tenant("b"), "RecentBeta3", external_id="r")
        _age(store, old_a, 40)
        _age(store, old_b, 31)
        _age(store, recent, 29)
        assert expire_idle(store, 30, time.time()) == 2
        assert store.tenant_ids() == ["b"]
        assert [c.id for c in store.for_tenant("b").list_conversations()] == [recent]
        assert expire_idle(store, 30, time.time()) == 0
    finally:
        store.close()


async def test_the_server_sweeps_at_start_up(make_proxy: ProxyFactory, fake_upstream: FakeUpstream,
                                             tmp_path: Path, app_store_url: str | None) -> None:
    path = tmp_path / "store.db"
    seeded = StoreSettings(path=str(path), url=app_store_url)  # the backend the app will open
    store = open_store(seeded)
    try:
        _age(store, marked_conversation(store.for_tenant("t"), "Expired9Marker"), 8)
        kept = marked_conversation(store.for_tenant("t"), "Fresh4Marker", external_id="f")
    finally:
        store.close()
    settings = replace(proxy_settings_for(fake_upstream.url, path),
                       store=replace(seeded, retention_days=7))
    server = await make_proxy(settings)
    check = server.app[appkeys.STORE]
    assert not store_holds(check, path, "Expired9Marker") and store_holds(check, path, "Fresh4Marker")
    assert [c.id for c in check.for_tenant("t").list_conversations()] == [kept]


def test_retention_days_is_validated_and_overridable(tmp_path: Path) -> None:
    assert load_settings(None, {}).store.retention_days is None
    assert load_settings(None, {"CTXPROXY_STORE__RETENTION_DAYS": "90"}).store.retention_days == 90
    with pytest.raises(ConfigError, match="store.retention_days"):
        load_settings(None, {"CTXPROXY_STORE__RETENTION_DAYS": "-1"})
