"""A last user message that cannot fit the window: OpenAI's 400 `context_length_exceeded` through the
SDK (the default), or the message elided in the middle behind a marker (`oversized_last_message:
truncate`); either way nothing over budget reaches the provider."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from config.settings import (
    CompactionSettings,
    LiteLLMParams,
    ModelEntry,
    OversizedLastMessage,
    Settings,
    StoreSettings,
)
from tests.conftest import TEST_API_KEY, ProxyFactory
from tests.fakes.upstream import FakeUpstream, Reply
from tests.sdk_params import sdk_messages

WINDOW = 8_000
HUGE = "lorem ipsum dolor " * 4_000  # ~12k tokens: more than the whole 8k window


def small_window(upstream_url: str, tmp_path: Path,
                 policy: OversizedLastMessage = "reject") -> Settings:
    settings = CompactionSettings(oversized_last_message=policy)
    entry = ModelEntry("gpt-4o-mini", LiteLLMParams("openai/gpt-4o-mini", upstream_url), WINDOW, settings)
    return Settings(model_list=(entry,), compaction=settings, store=StoreSettings(str(tmp_path / "c.db")))


async def test_an_oversized_last_message_is_openais_400(make_proxy: ProxyFactory, fake_upstream: FakeUpstream,
                                                       tmp_path: Path) -> None:
    server = await make_proxy(small_window(fake_upstream.url, tmp_path))
    async with openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key=TEST_API_KEY,
                                  max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(model="gpt-4o-mini", messages=sdk_messages(
                [{"role": "system", "content": "You are terse."}, {"role": "user", "content": HUGE}]))
    error = info.value
    assert error.status_code == 400 and error.code == "context_length_exceeded"
    assert isinstance(error.body, dict) and error.body.get("param") == "messages"
    assert error.body.get("type") == "invalid_request_error"
    assert fake_upstream.requests == []  # nothing was sent upstream


async def test_the_truncate_policy_elides_it_and_answers(make_proxy: ProxyFactory,
                                                        fake_upstream: FakeUpstream, tmp_path: Path) -> None:
    server = await make_proxy(small_window(fake_upstream.url, tmp_path, "truncate"))
    fake_upstream.queue(Reply(text="Too long, but here is my answer."))
    async with openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key=TEST_API_KEY,
                                  max_retries=0) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=sdk_messages([{"role": "user", "content": HUGE}]))
    assert raw.parse().choices[0].message.content == "Too long, but here is my answer."
    sent = fake_upstream.last_body["messages"][-1]["content"]
    assert sent.startswith("lorem ipsum") and "elided here" in sent and sent.rstrip().endswith("dolor")
    assert int(raw.headers["X-Ctxproxy-Tokens-Forwarded"]) <= WINDOW - 2_000 - 256
