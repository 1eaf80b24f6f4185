"""server.require_client_key holds on every route of the app's route table, before any handler runs."""

from __future__ import annotations

import json
import re
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from proxy.server.auth import is_open
from tests.conftest import TEST_API_KEY, ProxyFactory
from tests.fakes.upstream import FakeUpstream

PLACEHOLDER = re.compile(r"\{[^}]+\}")
CHAT = [{"role": "user", "content": "hi"}]
# What the audit saw forwarded keyless with the operator's key.
AUDITED = [
    ("POST", "/v1/embeddings", {"model": "keyed-model", "input": "x"}),
    ("GET", "/v1/files", None),
    ("DELETE", "/v1/files/file-abc", None),
    ("POST", "/v1/audio/speech", {"model": "keyed-model", "input": "hi", "voice": "alloy"}),
    ("GET", "/v1/responses/resp_abc", None),
    ("POST", "/v1/messages/count_tokens", {"model": "keyed-model", "messages": CHAT}),
    ("POST", "/v1/responses", {"model": "keyed-model", "input": "hi", "previous_response_id": "resp_a"}),
    ("GET", "/v1/models", None),
]


def route_table(server: TestServer) -> list[tuple[str, str]]:
    """(method, a concrete path) for every route the app registered; `*` routes asked with GET."""
    calls = set()
    for route in server.app.router.routes():
        if route.method == "HEAD" or route.resource is None:
            continue
        path = PLACEHOLDER.sub("x", route.resource.canonical)
        calls.add(("GET" if route.method == "*" else route.method, path))
    return sorted(calls)


async def _call(server: TestServer, method: str, path: str, body: Any,
                key: str | None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with aiohttp.ClientSession() as http, http.request(
            method, server.make_url(path), json=body, headers=headers) as resp:
        text = await resp.text()
        return resp.status, json.loads(text) if resp.content_type == "application/json" else text


def assert_refused(path: str, status: int, body: Any) -> None:
    """401 in the route's shape: Anthropic's on /v1/messages*, OpenAI's elsewhere."""
    assert status == 401, (path, status, body)
    if path.startswith("/v1/messages"):
        assert body["type"] == "error" and body["error"]["type"] == "authentication_error"
    else:
        assert (body["error"]["type"], body["error"]["code"]) == ("authentication_error", "missing_api_key")


async def test_every_route_refuses_keyless_callers_when_a_key_is_required(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream) -> None:
    server = await make_proxy(require_client_key=True)
    table = route_table(server)
    assert len(table) > 20 and ("POST", "/v1/chat/completions") in table
    for method, path in table:
        status, body = await _call(server, method, path, {} if method == "POST" else None, None)
        if is_open(path):
            assert status != 401, (method, path)
        else:
            assert_refused(path, status, body)
    assert fake_upstream.requests == []  # the operator's key never went out
    for method, path in table:
        status, body = await _call(server, method, path, {} if method == "POST" else None, TEST_API_KEY)
        assert status != 401, (method, path, body)


@pytest.mark.parametrize(("method", "path", "body"), AUDITED)
async def test_audited_keyless_requests_never_reach_the_upstream(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream, method: str, path: str, body: Any) -> None:
    server = await make_proxy(require_client_key=True)
    status, answer = await _call(server, method, path, body, None)
    assert_refused(path, status, answer)
    assert fake_upstream.requests == []
    status, _ = await _call(server, method, path, body, TEST_API_KEY)
    assert status != 401


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics", "/ui/login"])
async def test_probes_metrics_and_the_inspector_stay_open(make_proxy: ProxyFactory, path: str) -> None:
    server = await make_proxy(require_client_key=True, admin_key="admin-key-0123456789")
    async with aiohttp.ClientSession() as http, http.get(server.make_url(path)) as resp:
        assert resp.status in (200, 503)  # 503: /readyz while warming up
