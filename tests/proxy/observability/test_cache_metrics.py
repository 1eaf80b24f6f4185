"""/metrics reports the bounded request-path caches: bytes held and the bound, per cache."""

from __future__ import annotations

import aiohttp
import openai
from prometheus_client.parser import text_string_to_metric_families

from proxy.wire.anthropic import MAX_TRANSLATED, TRANSLATED_BYTES
from store.encoding.running_hashes import MAX_KEY_BYTES, MAX_RUN_BYTES
from store.history.prefix_rows import MAX_MADE_BYTES, MAX_ROWS, ROW_BYTES
from tests.fakes.upstream import FakeUpstream, Reply


def _by_cache(text: str, name: str) -> dict[str, float]:
    return {s.labels["cache"]: s.value for family in text_string_to_metric_families(text)
            if family.name == name for s in family.samples}


async def test_cache_gauges_after_a_resend(openai_client: openai.AsyncOpenAI, proxy_url: str,
                                          fake_upstream: FakeUpstream) -> None:
    messages: list[dict[str, str]] = [{"role": "user", "content": "first question about cache gauges"}]
    for turn in range(2):  # the second request resends the first: its stored rows are kept
        fake_upstream.queue(Reply(text=f"answer {turn}"))
        reply = await openai_client.chat.completions.create(model="gpt-4o-mini", messages=messages)  # type: ignore[arg-type]
        messages += [{"role": "assistant", "content": reply.choices[0].message.content or ""},
                     {"role": "user", "content": f"follow-up {turn}"}]
    async with aiohttp.ClientSession() as http, http.get(proxy_url + "/metrics") as resp:
        text = await resp.text()
    held = _by_cache(text, "ctxproxy_cache_bytes")
    bound = _by_cache(text, "ctxproxy_cache_limit_bytes")
    runs = MAX_KEY_BYTES + MAX_RUN_BYTES  # each memo and the last sequence of each of its runs
    assert bound == {"chain_hashes": runs, "forwarded_hashes": runs,
                     "prefix_rows": MAX_ROWS * ROW_BYTES + MAX_MADE_BYTES,  # rows and records
                     "anthropic_translations": MAX_TRANSLATED * TRANSLATED_BYTES,
                     "responses_translations": MAX_TRANSLATED * TRANSLATED_BYTES}
    assert set(held) == set(bound)
    assert held.pop("anthropic_translations") == held.pop("responses_translations") == 0  # chat only
    assert all(0 < held[c] <= bound[c] for c in held)
