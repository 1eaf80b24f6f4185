"""The HTTP loop stays responsive: `/healthz` answers within 100 ms at p99 while a first compaction
(the first summarizer call after start-up) and a 10 MB request are in flight.

The engine and the store run on their own thread (proxy/engine_host.py), so neither SQLite's
full-text indexing of 10 MB nor planning a compaction holds the loop that answers `/healthz`.
The scenario and its pieces are bench/loop_stall.py's, which prints the same figures.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from bench.common import HEADERS, history, pct
from bench.loop_stall import large_body, poll_health, stall_settings
from proxy.app import create_app
from tests.fakes.upstream import FakeUpstream, Reply

HEALTHZ_P99_MS = 100.0
SUMMARIZER_DELAY_S = 0.5


async def _post(http: aiohttp.ClientSession, url: str, body: bytes) -> dict[str, str]:
    async with http.post(url, data=body, headers=HEADERS) as resp:
        await resp.read()
        assert resp.status == 200
        return dict(resp.headers)


@pytest.mark.slow
async def test_healthz_answers_while_a_first_compaction_and_a_10_mb_request_run(
        tmp_path: Path, fake_upstream: FakeUpstream) -> None:
    summarizer = await FakeUpstream().start()
    summarizer.responder = lambda body: Reply(text="## Summary\n- the build was discussed",
                                              delay_s=SUMMARIZER_DELAY_S)
    proxy = TestServer(create_app(stall_settings(fake_upstream.url, summarizer.url, tmp_path / "s.db")))
    await proxy.start_server()
    health: list[float] = []
    stop = asyncio.Event()
    try:
        async with aiohttp.ClientSession() as http:
            poller = asyncio.create_task(poll_health(http, str(proxy.make_url("/healthz")), health, stop))
            chat = str(proxy.make_url("/v1/chat/completions"))
            compacting = json.dumps({"model": "gpt-4o-mini", "messages": history(40_000, "stall")})
            headers = await asyncio.gather(_post(http, chat, compacting.encode()),
                                           _post(http, chat, large_body(10.0)))
            stop.set()
            await poller
    finally:
        await proxy.close()
        await summarizer.close()
    assert headers[0]["X-Ctxproxy-Compacted"] == "true" and summarizer.requests  # a real first compaction
    sizes = [len(json.dumps(r.body)) for r in fake_upstream.requests]
    assert max(sizes) > 9_000_000  # the 10 MB request was forwarded whole
    assert len(health) >= 20, "the poller ran throughout both requests"
    assert pct(health, 99) < HEALTHZ_P99_MS, f"/healthz p99 {pct(health, 99):.1f} ms"
