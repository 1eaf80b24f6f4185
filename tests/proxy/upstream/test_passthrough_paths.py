"""Pass-through stays under the entry's api_base path: hostile paths are a 400, none reaches the host."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from yarl import URL

from config.settings import LiteLLMParams, ModelEntry, Settings, StoreSettings
from proxy.upstream.paths import unsafe_reason
from tests.conftest import TEST_API_KEY, ProxyFactory
from tests.fakes.provider_objects import BASE, ProviderObjects

OPERATOR_KEY = "sk-operator-0123456789abcdef"
HOSTILE = [
    ("GET", "/v1/..%2F..%2Fadmin"),
    ("GET", "/v1/%252e%252e/%252e%252e/z"),
    ("GET", "/v1/models/wild-x%2F..%2F..%2F..%2Fprivate"),
    ("DELETE", "/v1/models/wild-x%2F..%2F..%2F..%2Fprivate"),
    ("GET", "/v1/../admin"),
    ("GET", "/v1/files/../../admin"),
    ("GET", "/v1/%2e%2e/%2e%2e/admin"),
    ("GET", "/v1/%2E%2E%2F%2E%2E%2Fadmin"),
    ("POST", "/v1/files/file-1%2F..%2F..%2F..%2Fadmin"),
    ("GET", "/v1/a/%2e/../../x"),
    ("GET", "/v1/%25252e%25252e/%25252e%25252e/deep"),
    ("GET", "/v1/..;/..;/admin"),
    ("GET", "/v1/..\\..\\admin"),
    ("GET", "/v1/files\\..\\..\\admin"),
    ("GET", "/v1/..%5C..%5Cadmin"),
    ("GET", "/v1/%255C..%255Cadmin"),
    ("GET", "/v1/files/%00/x"),
    ("GET", "/v1/models/wild-%252F..%252F..%252Fadmin"),
]


@pytest.fixture
async def gateway() -> AsyncIterator[ProviderObjects]:
    fake = await ProviderObjects().start()
    try:
        yield fake
    finally:
        await fake.close()


def gateway_settings(base: str, store: Path, key: str | None) -> Settings:
    """An entry and a wildcard, both behind a gateway base such as /openai/v1, keyed with `key`."""
    return Settings(model_list=(
        ModelEntry("keyed", LiteLLMParams("openai/gpt-4o", base, key), 128_000),
        ModelEntry("wild-*", LiteLLMParams("openai/*", base, key), 128_000)),
        store=StoreSettings(path=str(store)))


@pytest.fixture
async def proxy(make_proxy: ProxyFactory, gateway: ProviderObjects, tmp_path: Path) -> TestServer:
    """Operator-keyed entries: what a path escaping the base would carry is the operator's key."""
    return await make_proxy(gateway_settings(gateway.url, tmp_path / "store.db", OPERATOR_KEY))


@pytest.fixture
async def client_keyed(make_proxy: ProxyFactory, gateway: ProviderObjects, tmp_path: Path) -> TestServer:
    """Entries using the client's key (no provider-object checks on the way)."""
    return await make_proxy(gateway_settings(gateway.url, tmp_path / "store.db", None))


async def _call(server: TestServer, method: str, raw_path: str,
                body: dict[str, Any] | None = None) -> tuple[int, Any]:
    url = URL(str(server.make_url("")).rstrip("/") + raw_path, encoded=True)  # sent byte for byte
    async with aiohttp.ClientSession() as http, http.request(
            method, url, json=body, headers={"Authorization": f"Bearer {TEST_API_KEY}"}) as resp:
        return resp.status, await resp.json(content_type=None)


@pytest.mark.parametrize(("method", "raw_path"), HOSTILE)
async def test_hostile_paths_are_refused_and_never_forwarded(proxy: TestServer, gateway: ProviderObjects,
                                                             method: str, raw_path: str) -> None:
    status, body = await _call(proxy, method, raw_path, {"model": "keyed"} if method == "POST" else None)
    assert status == 400, body
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["code"] == "invalid_path"
    assert f"({method} {raw_path})" in body["error"]["message"]
    assert gateway.paths == []


@pytest.mark.parametrize(("method", "raw_path", "received"), [
    ("GET", "/v1/models/wild-x", f"{BASE}/models/wild-x"),
    ("GET", "/v1/files/file-abc", f"{BASE}/files/file-abc"),
    ("GET", "/v1/files/file-abc/content", f"{BASE}/files/file-abc/content"),
    ("GET", "/v1/files?purpose=batch&after=a%26b", f"{BASE}/files?purpose=batch&after=a%26b"),
    ("GET", "/v1/vector_stores/vs%2Fone/files", f"{BASE}/vector_stores/vs%2Fone/files"),
    ("GET", "/v1/files/report..v2.txt", f"{BASE}/files/report..v2.txt"),
    ("POST", "/v1/embeddings", f"{BASE}/embeddings"),
])
async def test_ordinary_paths_reach_the_base_path_as_sent(client_keyed: TestServer, gateway: ProviderObjects,
                                                          method: str, raw_path: str, received: str) -> None:
    status, _ = await _call(client_keyed, method, raw_path, {"model": "keyed", "input": "x"}
                            if method == "POST" else None)
    assert status in (200, 404)  # 404: the fake provider has no such file
    assert gateway.paths == [received]


async def test_the_local_model_list_still_answers(proxy: TestServer, gateway: ProviderObjects) -> None:
    status, body = await _call(proxy, "GET", "/v1/models")
    assert status == 200 and body["object"] == "list"
    assert gateway.outside_base() == []


@pytest.mark.parametrize("tail", ["files/file-1", "vector_stores/vs_1/files", "a..b/c.d", "v1.2/x"])
def test_ordinary_tails_are_safe(tail: str) -> None:
    assert unsafe_reason(tail) is None
