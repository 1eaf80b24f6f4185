"""Through the served app: a conversation compacted with the built-in summarizer choice (the request's
own OpenAI-compatible upstream) gets its summaries from WireSummarizer, which POSTs the prompt to
that upstream with the client's key; the summaries it returns are committed and forwarded."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import openai

from config.settings import SummarizerSettings
from proxy import appkeys
from tests.conftest import ProxyFactory, settled
from tests.fakes.upstream import FakeUpstream, Reply
from tests.proxy.observability.obs_support import MODEL, drive, small_window_settings

KEY = "sk-test-wire-0123456789abcdefghij"
PROMPT_OPENING = "You compact conversation history"


def summarizing(body: dict[str, Any]) -> Reply | None:
    """A summary request gets back the first planted order line of its source text, verbatim."""
    first = body["messages"][0]
    if first["role"] != "system" or not str(first["content"]).startswith(PROMPT_OPENING):
        return None
    line = re.search(r"Turn \d+: order ORD-\d+ is pending review\.", body["messages"][1]["content"])
    return Reply(text=f"- {line.group(0)}" if line else "- nothing to keep")


async def test_summaries_come_over_http_from_the_requests_own_upstream(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream, tmp_path: Path) -> None:
    fake_upstream.responder = summarizing
    settings = replace(small_window_settings(fake_upstream.url, tmp_path / "wire.db"),
                       summarizer=SummarizerSettings())
    server = await make_proxy(settings)
    client = openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key=KEY, max_retries=0)
    driven = await drive(client, server.app, 30)
    await client.close()
    await settled(server)

    calls = [r for r in fake_upstream.requests
             if r.body.get("messages") and str(r.body["messages"][0]["content"]).startswith(PROMPT_OPENING)]
    assert calls and all(r.path == "/v1/chat/completions" and r.headers["Authorization"] == f"Bearer {KEY}"
                         and r.body["model"] == MODEL for r in calls)
    assert all("aiohttp" in r.headers["User-Agent"] for r in calls)  # ctxproxy's own client, not litellm's
    store = server.app[appkeys.STORE]
    tenant = store.for_tenant(store.tenant_id_for_key(KEY))
    cid = driven.headers[-1]["x-ctxproxy-conversation-id"]
    by_llm = [e for e in tenant.events(cid) if e.level == "normal" and e.outcome == "committed"]
    assert by_llm and all(e.summarizer_model == f"openai/{MODEL}" for e in by_llm)
    assert any("ORD-" in s.content for s in tenant.summaries(cid) if s.level == "normal")
