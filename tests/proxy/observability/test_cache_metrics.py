"""/metrics reports every bounded request-path cache (bytes, bound); `server.cache_mib` sizes them all."""

from __future__ import annotations

import aiohttp
import openai
from prometheus_client.parser import text_string_to_metric_families

from compaction.messages import MAX_VALID_BYTES
from compaction.resend.previous import MAX_BYTES as RESENDS_BYTES
from compaction.steps.quiet import ENTRY_BYTES, MAX_CONVERSATIONS
from compaction.tokens import RECOUNTED_BYTES
from compaction.view.raw_runs import MAX_RECORDS, RECORD_BYTES
from compaction.view.slot_memo import MAX_SLOTS, SLOT_BYTES
from config import cache_budget
from config.cache_budget import DEFAULT_CACHE_MIB
from proxy.server.resent_body import MAX_BYTES as RESENT_BYTES
from proxy.wire.anthropic import MAX_TRANSLATED, TRANSLATED_BYTES
from store.encoding.running_hashes import MAX_KEY_BYTES, MAX_RUN_BYTES
from store.history.prefix_rows import MAX_MADE_BYTES, MAX_ROWS, ROW_BYTES
from store.summaries import SOURCES_MAX_BYTES
from tests.conftest import ProxyFactory
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
    assert {"chain_hashes": runs, "forwarded_hashes": runs,
            "prefix_rows": MAX_ROWS * ROW_BYTES + MAX_MADE_BYTES,  # rows and records
            "anthropic_translations": MAX_TRANSLATED * TRANSLATED_BYTES,
            "responses_translations": MAX_TRANSLATED * TRANSLATED_BYTES,
            "resends": RESENDS_BYTES, "resent_bodies": RESENT_BYTES, "resent_inputs": RESENT_BYTES,
            "valid_messages": MAX_VALID_BYTES, "recounted_o200k_base": RECOUNTED_BYTES,
            "view_slots": MAX_SLOTS * SLOT_BYTES, "raw_runs": MAX_RECORDS * RECORD_BYTES,
            "idle_steps": MAX_CONVERSATIONS * ENTRY_BYTES,
            "summary_sources": SOURCES_MAX_BYTES}.items() <= bound.items()
    one_tokenizer = sum(b for c, b in bound.items() if not c.startswith("recounted_")) + RECOUNTED_BYTES
    assert abs(one_tokenizer / 2**20 - DEFAULT_CACHE_MIB) < 8  # the default bounds add up to it
    assert set(held) == set(bound)
    assert held["anthropic_translations"] == held["responses_translations"] == 0  # chat only
    assert {c: held[c] for c in bound if held[c] > bound[c]} == {}
    assert all(held[c] > 0 for c in ("chain_hashes", "forwarded_hashes", "prefix_rows",
                                                  "resends", "valid_messages"))


async def test_server_cache_mib_scales_every_cache_bound(make_proxy: ProxyFactory) -> None:
    try:
        server = await make_proxy(cache_mib=2 * DEFAULT_CACHE_MIB)
        async with aiohttp.ClientSession() as http, http.get(str(server.make_url("/metrics"))) as resp:
            bound = _by_cache(await resp.text(), "ctxproxy_cache_limit_bytes")
        assert bound["resends"] == 2 * RESENDS_BYTES and bound["view_slots"] == 2 * MAX_SLOTS * SLOT_BYTES
        assert bound["prefix_rows"] == 2 * (MAX_ROWS * ROW_BYTES + MAX_MADE_BYTES)
    finally:
        cache_budget.apply(DEFAULT_CACHE_MIB)
    assert cache_budget.fill()["resends"][1] == RESENDS_BYTES
