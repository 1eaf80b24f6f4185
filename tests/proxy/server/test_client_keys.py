"""Keyless callers: server.require_client_key, and recall refused to the anonymous tenant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from config.loader import load_settings
from tests.conftest import TEST_API_KEY, ProxyFactory
from tests.fakes.upstream import FakeUpstream, Reply

CHAT = {"model": "keyed-model", "messages": [{"role": "user", "content": "hi"}]}


async def _post(server: Any, path: str, body: dict[str, Any],
                key: str | None = None) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with aiohttp.ClientSession() as session, session.post(
            server.make_url(path), json=body, headers=headers) as resp:
        return resp.status, await resp.json()


async def test_required_client_key_refuses_keyless_chat(make_proxy: ProxyFactory,
                                                        fake_upstream: FakeUpstream) -> None:
    server = await make_proxy(require_client_key=True)
    status, body = await _post(server, "/v1/chat/completions", CHAT)
    assert status == 401
    assert body["error"]["type"] == "authentication_error"
    assert body["error"]["code"] == "missing_api_key"
    assert fake_upstream.requests == []  # the operator's key never went out
    fake_upstream.queue(Reply(text="ok"))
    status, _ = await _post(server, "/v1/chat/completions", CHAT, key=TEST_API_KEY)
    assert status == 200
    assert fake_upstream.requests[-1].headers["Authorization"] == "Bearer sk-upstream-configured-0123456789"


async def test_keyless_chat_is_relayed_by_default(make_proxy: ProxyFactory,
                                                  fake_upstream: FakeUpstream) -> None:
    """The documented default: an entry with its own key answers keyless callers (docs/operations.md)."""
    server = await make_proxy()
    fake_upstream.queue(Reply(text="ok"))
    status, body = await _post(server, "/v1/chat/completions", CHAT)
    assert status == 200 and body["choices"][0]["message"]["content"] == "ok"


@pytest.mark.parametrize("require", [False, True])
@pytest.mark.parametrize(("path", "body"), [
    ("/v1/context/search", {"pattern": "x", "all_conversations": True}),
    ("/v1/context/expand", {"ids": ["1"]})])
async def test_recall_refuses_keyless_callers(make_proxy: ProxyFactory, path: str, body: dict[str, Any],
                                              require: bool) -> None:
    server = await make_proxy(require_client_key=require)
    status, error = await _post(server, path, body)
    assert status == 401
    assert error["error"]["message"] == ("recall needs an API key: keyless callers share one "
                                         "anonymous tenant")
    status, answer = await _post(server, path, body, key=TEST_API_KEY)
    if path.endswith("search"):  # a keyed caller searches its own (empty) history
        assert (status, answer["object"], answer["data"]) == (200, "list", [])
    else:  # ...and its expand reaches the store: an id it does not own is unknown
        assert (status, answer["error"]["code"]) == (404, "not_found")


def test_require_client_key_loads_from_yaml_and_env(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("server:\n  require_client_key: true\n", encoding="utf-8")
    assert load_settings(str(config), {}).server.require_client_key is True
    assert load_settings(None, {}).server.require_client_key is False
    env = {"CTXPROXY_SERVER__REQUIRE_CLIENT_KEY": "true"}
    assert load_settings(None, env).server.require_client_key is True
