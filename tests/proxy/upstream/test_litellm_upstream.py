"""The litellm transport: clients cannot steer where or with which credentials the proxy calls.

A `deepseek/` entry goes through litellm (not the fast path) yet speaks OpenAI's wire format, so the
fake upstream answers it for real. litellm.acompletion is wrapped only to record its keyword
arguments (the call itself goes through).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from openai.types.chat import ChatCompletionUserMessageParam

from config.settings import LiteLLMParams, ModelEntry, ServerSettings, Settings, StoreSettings
from tests.conftest import TEST_API_KEY, ProxyFactory
from tests.fakes.upstream import FakeUpstream

CONFIGURED_KEY = "sk-upstream-configured-0123456789"
TIMEOUT_S = 42.0
USER: ChatCompletionUserMessageParam = {"role": "user", "content": "hi"}


def litellm_settings(url: str, store: Path) -> Settings:
    models = (
        ModelEntry("ds-keyed", LiteLLMParams("deepseek/deepseek-chat", url, CONFIGURED_KEY), 64_000),
        ModelEntry("ds-open", LiteLLMParams("deepseek/deepseek-chat", url), 64_000),
        ModelEntry("ds-own-timeout", LiteLLMParams("deepseek/deepseek-chat", url, CONFIGURED_KEY,
                                                   {"timeout": 5.0}), 64_000),
    )
    return Settings(model_list=models, store=StoreSettings(path=str(store)),
                    server=ServerSettings(upstream_timeout_s=TIMEOUT_S))


@pytest.fixture
def litellm_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every litellm.acompletion call's keyword arguments (the call still runs)."""
    from compaction.llm import get_litellm

    litellm = get_litellm()
    real = litellm.acompletion
    calls: list[dict[str, Any]] = []

    async def recording(**kwargs: Any) -> Any:
        calls.append(dict(kwargs))
        return await real(**kwargs)

    monkeypatch.setattr(litellm, "acompletion", recording)
    return calls


@pytest.fixture
async def evil() -> AsyncIterator[FakeUpstream]:
    fake = await FakeUpstream().start()
    try:
        yield fake
    finally:
        await fake.close()


@pytest.fixture
async def client(make_proxy: ProxyFactory, fake_upstream: FakeUpstream,
                 tmp_path: Path) -> AsyncIterator[openai.AsyncOpenAI]:
    server = await make_proxy(litellm_settings(fake_upstream.url, tmp_path / "s.db"))
    url = str(server.make_url("/v1"))
    async with openai.AsyncOpenAI(base_url=url, api_key=TEST_API_KEY, max_retries=0) as c:
        yield c


def hostile_body(evil_url: str) -> dict[str, Any]:
    return {"base_url": evil_url, "api_base": evil_url, "api_key": "sk-attacker",
            "extra_headers": {"X-Evil": "yes"}, "headers": {"X-Evil": "yes"},
            "custom_llm_provider": "openai", "mock_response": "pwned", "timeout": 0.001,
            "metadata": {"x": "y"}, "aws_access_key_id": "AKIA-attacker"}


@pytest.mark.parametrize("stream", [False, True])
async def test_client_body_cannot_redirect_or_override_credentials(
        client: openai.AsyncOpenAI, fake_upstream: FakeUpstream, evil: FakeUpstream,
        litellm_calls: list[dict[str, Any]], stream: bool) -> None:
    reply = await client.chat.completions.create(model="ds-keyed", messages=[USER], temperature=0.2,
                                                 stream=stream, extra_body=hostile_body(evil.url))
    text: str | None
    if isinstance(reply, openai.AsyncStream):  # stream=True
        text = "".join([c.choices[0].delta.content or "" async for c in reply if c.choices])
    else:
        text = reply.choices[0].message.content
    assert text == "ok"
    assert evil.requests == []
    sent = fake_upstream.requests[-1].headers
    assert sent["Authorization"] == f"Bearer {CONFIGURED_KEY}" and "X-Evil" not in sent
    kwargs = litellm_calls[-1]
    assert (kwargs["api_base"], kwargs["api_key"], kwargs["temperature"]) == (fake_upstream.url,
                                                                              CONFIGURED_KEY, 0.2)
    assert not {"base_url", "extra_headers", "headers", "custom_llm_provider", "mock_response",
                "metadata", "aws_access_key_id"} & set(kwargs)
    assert kwargs["timeout"] == TIMEOUT_S


async def test_no_key_anywhere_is_401_not_the_proxys_environment_key(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, litellm_calls: list[dict[str, Any]]) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-operator-environment-key")
    server = await make_proxy(litellm_settings(fake_upstream.url, tmp_path / "s.db"))
    body = {"model": "ds-open", "messages": [USER]}
    async with aiohttp.ClientSession() as http, http.post(
            server.make_url("/v1/chat/completions"), json=body) as resp:
        assert resp.status == 401
        error = (await resp.json())["error"]
    assert error["type"] == "authentication_error"
    assert fake_upstream.requests == [] and litellm_calls == []


async def test_client_key_is_used_for_an_unkeyed_entry(client: openai.AsyncOpenAI,
                                                       fake_upstream: FakeUpstream) -> None:
    await client.chat.completions.create(model="ds-open", messages=[USER])
    assert fake_upstream.requests[-1].headers["Authorization"] == f"Bearer {TEST_API_KEY}"


@pytest.mark.parametrize("stream", [False, True])
async def test_server_upstream_timeout_applies_unless_the_entry_sets_one(
        client: openai.AsyncOpenAI, litellm_calls: list[dict[str, Any]], stream: bool) -> None:
    for model in ("ds-keyed", "ds-own-timeout"):
        reply = await client.chat.completions.create(model=model, messages=[USER], stream=stream)
        if isinstance(reply, openai.AsyncStream):  # stream=True
            _ = [c async for c in reply]
    default, own = litellm_calls[-2:]
    assert (default["timeout"], default["stream_timeout"]) == (TIMEOUT_S, TIMEOUT_S)
    assert (own["timeout"], own["stream_timeout"]) == (5.0, TIMEOUT_S)
