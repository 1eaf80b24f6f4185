"""WireSummarizer against the fake upstream (real sockets): what it sends, what it returns, and every
failure (status, body, timeout, refused connection) a SummarizerError with secrets redacted. Also
the warm-up's choice: litellm is loaded only when a route or the summarizer needs it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from compaction import build_request
from config.errors import SummarizerError
from config.settings import LiteLLMParams, ModelEntry, Settings, SummarizerSettings, default_model_list
from proxy.server.warmup import needs_litellm
from proxy.summarizers import HttpSession, WireSummarizer
from tests.fakes.upstream import ErrorReply, FakeUpstream, Reply

KEY = "sk-summarizer-key-0000000000000001"
REQUEST = build_request("leaf", "normal", "[msg 1] user: deploy to eu-west-3", "", 300)


async def summarize(fake: FakeUpstream, model: str = "openai/gpt-4o-mini", timeout_s: float = 5.0,
                    extra: dict[str, object] | None = None) -> str:
    http = HttpSession()
    params = LiteLLMParams(model, fake.url, KEY, dict(extra or {}))
    try:
        return await WireSummarizer(params, SummarizerSettings(timeout_s=timeout_s, temperature=0.0),
                                    http).complete(REQUEST)
    finally:
        await http.aclose()


async def test_it_posts_the_prompt_and_returns_the_reply_text(fake_upstream: FakeUpstream) -> None:
    fake_upstream.queue(Reply(text="- deploy target: eu-west-3"))
    assert await summarize(fake_upstream, extra={"extra_headers": {"X-Team": "ops"}, "seed": 7}) \
        == "- deploy target: eu-west-3"
    sent = fake_upstream.requests[-1]
    assert sent.path == "/v1/chat/completions" and sent.headers["Authorization"] == f"Bearer {KEY}"
    assert sent.headers["X-Team"] == "ops"
    assert sent.body == {"model": "gpt-4o-mini", "max_tokens": 600, "temperature": 0.0, "seed": 7,
                         "messages": [{"role": "system", "content": REQUEST.system_prompt},
                                      {"role": "user", "content": REQUEST.user_prompt}]}


@pytest.mark.parametrize("model", ["openai/o3-mini", "gpt-5-mini"])
async def test_reasoning_models_get_max_completion_tokens_and_their_default_temperature(
        fake_upstream: FakeUpstream, model: str) -> None:
    await summarize(fake_upstream, model)
    body = fake_upstream.last_body
    assert body["max_completion_tokens"] == 600 and "max_tokens" not in body and "temperature" not in body


@pytest.mark.parametrize(("script", "expected"), [
    (ErrorReply(500, {"error": {"message": f"upstream broke for {KEY}"}}), "answered 500"),
    (ErrorReply(200, b"<html>not json</html>"), "not a chat completion"),
    (ErrorReply(200, {"choices": []}), "not a chat completion"),
    (Reply(text="late", delay_s=1.0), "did not answer in time"),
])
async def test_failures_are_summarizer_errors_without_the_key(fake_upstream: FakeUpstream,
                                                               script: Reply | ErrorReply,
                                                               expected: str) -> None:
    fake_upstream.queue(script)
    with pytest.raises(SummarizerError) as caught:
        await summarize(fake_upstream, timeout_s=0.3)
    assert expected in caught.value.message and KEY not in caught.value.message


async def test_a_refused_connection_is_a_summarizer_error() -> None:
    http = HttpSession()
    params = LiteLLMParams("openai/gpt-4o-mini", "http://127.0.0.1:9/v1", KEY)
    try:
        with pytest.raises(SummarizerError, match="cannot reach the upstream provider at 127.0.0.1:9"):
            await WireSummarizer(params, SummarizerSettings(), http).complete(REQUEST)
    finally:
        await http.aclose()


async def test_a_reply_without_text_is_empty(fake_upstream: FakeUpstream) -> None:
    fake_upstream.queue(Reply(text=None))
    assert await summarize(fake_upstream) == ""


ANTHROPIC = ModelEntry("claude", LiteLLMParams("anthropic/claude-haiku-4-5", None, "k"))
OPENAI = ModelEntry("gpt", LiteLLMParams("openai/gpt-4o", "http://127.0.0.1:9/v1"))


@pytest.mark.parametrize(("settings", "expected"), [
    (Settings(default_model_list()), False),  # built in: all to OpenAI, summaries by the same model
    (Settings(model_list=(OPENAI,)), False),
    (Settings(model_list=(OPENAI, ANTHROPIC)), True),
    (Settings(model_list=(OPENAI,), summarizer=SummarizerSettings(model="anthropic/claude-haiku-4-5")), True),
    (Settings(model_list=(OPENAI,), summarizer=SummarizerSettings(extra={"num_retries": 2})), True),
    (Settings(model_list=(ANTHROPIC,), summarizer=SummarizerSettings(model="local/extractive")), True),
    (Settings(model_list=(OPENAI,), summarizer=SummarizerSettings(model="local/extractive")), False),
])
def test_litellm_is_loaded_only_when_something_goes_through_it(settings: Settings, expected: bool) -> None:
    assert needs_litellm(settings) is expected


def test_the_built_in_configs_warm_up_never_imports_litellm() -> None:
    """In a fresh interpreter (this one has litellm loaded by other tests): the warm-up, then a
    context window looked up, leave litellm unimported; an Anthropic entry's warm-up imports it."""
    script = """
import json, sys
from config.settings import LiteLLMParams, ModelEntry, Settings, default_model_list
from compaction import resolve_context_window
from proxy.server.warmup import load_heavy
load_heavy(Settings(default_model_list()))
window = resolve_context_window(Settings(default_model_list()), "gpt-4o")
before = "litellm" in sys.modules
load_heavy(Settings(model_list=(ModelEntry("c", LiteLLMParams("anthropic/claude-haiku-4-5", None, "k")),)))
print(json.dumps([before, window[0], window[1], "litellm" in sys.modules]))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         check=True)
    assert json.loads(out.stdout.splitlines()[-1]) == [False, 128_000, "provider_metadata", True]
