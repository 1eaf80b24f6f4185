"""litellm params on OpenAI-compatible (fast path) entries: applied as HTTP, or refused at load."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from config.errors import ConfigError
from config.loader import load_settings
from config.settings import LiteLLMParams, ModelEntry
from tests.conftest import TEST_API_KEY, ProxyFactory, proxy_settings_for
from tests.fakes.upstream import FakeUpstream, Reply


def _load(tmp_path: Path, params: str, env: dict[str, str] | None = None) -> Any:
    config = tmp_path / "c.yaml"
    config.write_text("model_list:\n  - model_name: m\n    litellm_params:\n" + params, encoding="utf-8")
    return load_settings(str(config), env or {})


@pytest.mark.parametrize("key", ["api_version: '2024-06-01'", "max_retries: 3", "rpm: 100",
                                 "drop_params: true", "extra_body: {a: 1}"])
def test_unapplied_params_on_fast_path_entries_are_errors(tmp_path: Path, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, f"      model: openai/gpt-4o\n      {key}\n")
    name = key.split(":")[0]
    assert caught.value.message.startswith(f"model_list[0].litellm_params.{name}: not applied")
    assert "organization" in caught.value.message  # says what is supported


def test_litellm_entries_keep_every_param(tmp_path: Path) -> None:
    settings = _load(tmp_path, "      model: anthropic/claude-sonnet-4\n      max_retries: 3\n"
                               "      api_version: v1\n")
    assert settings.model_list[0].litellm_params.extra == {"max_retries": 3, "api_version": "v1"}


def test_fast_path_params_are_checked_and_normalised(tmp_path: Path) -> None:
    settings = _load(tmp_path, "      model: openai/gpt-4o\n      timeout: os.environ/T\n"
                               "      organization: org-1\n      extra_headers: {X-A: b}\n",
                     {"T": "12.5"})
    assert settings.model_list[0].litellm_params.extra == {
        "timeout": 12.5, "organization": "org-1", "extra_headers": {"X-A": "b"}}
    for bad in ("timeout: -1", "timeout: soon", "stream_timeout: true", "organization: 7",
                "headers: [a]"):
        with pytest.raises(ConfigError, match=r"model_list\[0\]\.litellm_params\."):
            _load(tmp_path, f"      model: openai/gpt-4o\n      {bad}\n")


def _with_entry(fake: FakeUpstream, tmp_path: Path, **extra: Any) -> Any:
    settings = proxy_settings_for(fake.url, tmp_path / "store.db")
    entry = ModelEntry("tuned", LiteLLMParams("openai/gpt-4o", fake.url, None, extra), 128_000)
    return dataclasses.replace(settings, model_list=(entry,))


async def _chat(server: Any, **body: Any) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {TEST_API_KEY}", "OpenAI-Organization": "org-client"}
    payload = {"model": "tuned", "messages": [{"role": "user", "content": "hi"}], **body}
    async with aiohttp.ClientSession() as session, session.post(
            server.make_url("/v1/chat/completions"), json=payload, headers=headers) as resp:
        return resp.status, await resp.json()


async def test_headers_organization_and_body_params_reach_the_upstream(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream, tmp_path: Path) -> None:
    server = await make_proxy(_with_entry(fake_upstream, tmp_path, organization="org-operator",
                                          extra_headers={"X-Team": "blue"}, temperature=0.1))
    fake_upstream.queue(Reply(text="ok"))
    status, _ = await _chat(server, temperature=0.9, seed=3)
    assert status == 200
    sent = fake_upstream.requests[-1]
    assert sent.headers["OpenAI-Organization"] == "org-operator"  # over the client's forwarded one
    assert sent.headers["X-Team"] == "blue"
    assert (sent.body["temperature"], sent.body["seed"]) == (0.1, 3)
    assert "organization" not in sent.body and "extra_headers" not in sent.body


async def test_entry_timeout_is_the_read_timeout(make_proxy: ProxyFactory, fake_upstream: FakeUpstream,
                                                 tmp_path: Path) -> None:
    server = await make_proxy(_with_entry(fake_upstream, tmp_path, timeout=0.2))  # server: 30 s
    fake_upstream.queue(Reply(delay_s=3))
    status, body = await _chat(server)
    assert status == 504 and body["error"]["code"] == "upstream_timeout"
