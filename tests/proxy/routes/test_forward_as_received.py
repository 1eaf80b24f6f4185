"""A Messages or Responses request forwarded uncompacted goes to the provider as the client sent it.

Its plan is the request itself (nothing compacted, one forwarded message per received one), so the
route forwards the client's own body: its very bytes when the provider knows the model by the name
the client sent (a resent 100k-token history is not encoded again), else re-encoded under the
provider's name."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from config.settings import CompactionSettings, LiteLLMParams, ModelEntry, Settings, StoreSettings
from tests.conftest import TEST_API_KEY, ProxyFactory
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.upstream import FakeUpstream

HEADERS = {"Authorization": f"Bearer {TEST_API_KEY}", "anthropic-version": "2023-06-01",
           "Content-Type": "application/json"}



@pytest.fixture
async def server(make_proxy: ProxyFactory, fake_anthropic: FakeAnthropic, fake_upstream: FakeUpstream,
                 tmp_path: Path) -> TestServer:
    off = CompactionSettings(background=False)
    claude = LiteLLMParams("anthropic/claude-sonnet-4-5", fake_anthropic.url)
    models = (ModelEntry("claude-sonnet-4-5", claude, 200_000, off),
              ModelEntry("claude-alias", claude, 200_000, off),
              ModelEntry("gpt-4o-mini", LiteLLMParams("openai/gpt-4o-mini", fake_upstream.url), 128_000, off))
    store = StoreSettings(str(tmp_path / "s.db"))
    return await make_proxy(Settings(model_list=models, compaction=off, store=store))


async def _post(server: TestServer, path: str, raw: bytes) -> None:
    async with aiohttp.ClientSession() as http, \
            http.post(server.make_url(path), data=raw, headers=HEADERS) as resp:
        assert resp.status == 200, await resp.text()


# Spaces, key order and an unknown field as a client might write them: kept byte for byte.
MESSAGES = (b'{"model": "claude-sonnet-4-5",  "max_tokens": 64, "metadata": {"user_id": "u-1"},\n'
            b' "messages": [{"role": "user",\n'
            b'  "content": [{"type": "text", "text": "caf\\u00e9 order 4711"}]}]}')
RESPONSES = (b'{"model": "gpt-4o-mini",  "instructions": "Be terse.",\n'
             b' "input": [{"type": "message", "role": "user", "content": "order 4711 please"}]}')


async def test_a_messages_request_reaches_the_provider_as_its_own_bytes(
        server: TestServer, fake_anthropic: FakeAnthropic) -> None:
    await _post(server, "/v1/messages", MESSAGES)
    assert fake_anthropic.requests[-1].raw == MESSAGES


async def test_a_responses_request_reaches_the_provider_as_its_own_bytes(
        server: TestServer, fake_upstream: FakeUpstream) -> None:
    await _post(server, "/v1/responses", RESPONSES)
    assert fake_upstream.requests[-1].raw == RESPONSES


async def test_a_model_the_provider_names_otherwise_is_renamed_and_the_rest_kept(
        server: TestServer, fake_anthropic: FakeAnthropic) -> None:
    await _post(server, "/v1/messages", MESSAGES.replace(b'"claude-sonnet-4-5"', b'"claude-alias"'))
    sent = fake_anthropic.requests[-1]
    assert sent.raw != MESSAGES and sent.body["model"] == "claude-sonnet-4-5"
    assert sent.body["metadata"] == {"user_id": "u-1"}
    assert sent.body["messages"][0]["content"][0]["text"] == "café order 4711"
