"""How long the proxy's event loop is held while a first compaction and a large request are in flight.

One process: the proxy (create_app), a fake model upstream and a fake LLM summarizer upstream
(answers after --summarizer-delay seconds) share one loop with a watcher that sleeps 10 ms and
records how late it wakes (the time every other request, /healthz included, waits extra), plus a
/healthz poller. Scenario, right after start-up: a request over its 12k-token window (a first,
synchronous compaction: the first summarizer call) and a request of --mb megabytes of text for a
large-window model, both in flight together. Prints loop-lag and /healthz percentiles in ms.

    python -m bench.loop_stall [--mb 10] [--summarizer-delay 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import aiohttp  # noqa: E402
from aiohttp.test_utils import TestServer  # noqa: E402

from bench.common import HEADERS, history, pct  # noqa: E402

WATCH_INTERVAL_S = 0.01


def stall_settings(model_url: str, summarizer_url: str, store: Path) -> Any:
    from config.settings import (
        LiteLLMParams,
        ModelEntry,
        ServerSettings,
        Settings,
        StoreSettings,
        SummarizerSettings,
    )

    small = ModelEntry("gpt-4o-mini", LiteLLMParams("openai/gpt-4o-mini", model_url), 12_000)
    large = ModelEntry("big-window", LiteLLMParams("openai/gpt-4o-mini", model_url), 8_000_000)
    return Settings(model_list=(small, large), store=StoreSettings(path=str(store)),
                    server=ServerSettings(log_level="warning"),
                    summarizer=SummarizerSettings(model="openai/fake-summarizer", api_base=summarizer_url,
                                                  api_key="sk-bench-summarizer-0123456789"))


def large_body(mb: float) -> bytes:
    """One user message of distinct words, about `mb` megabytes of JSON."""
    words = int(mb * 1_000_000 / 8)
    text = " ".join(f"w{i:06d}" for i in range(words))
    return json.dumps({"model": "big-window", "messages": [{"role": "user", "content": text}]}).encode()


async def watch(lags: list[float], stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        started = loop.time()
        await asyncio.sleep(WATCH_INTERVAL_S)
        lags.append(max(0.0, loop.time() - started - WATCH_INTERVAL_S) * 1000)


async def poll_health(http: aiohttp.ClientSession, url: str, out: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        began = time.perf_counter()
        async with http.get(url) as resp:
            await resp.read()
        out.append((time.perf_counter() - began) * 1000)
        await asyncio.sleep(0.02)


async def post(http: aiohttp.ClientSession, url: str, body: bytes) -> str:
    began = time.perf_counter()
    async with http.post(url, data=body, headers=HEADERS) as resp:
        await resp.read()
        return f"{resp.status} in {time.perf_counter() - began:.2f} s"


async def run(args: argparse.Namespace) -> dict[str, list[float]]:
    from proxy.app import create_app
    from tests.fakes.upstream import FakeUpstream, Reply

    model, summarizer = await FakeUpstream().start(), await FakeUpstream().start()
    summarizer.responder = lambda body: Reply(text="## Summary\n- the build was discussed",
                                              delay_s=args.summarizer_delay)
    compacting = json.dumps({"model": "gpt-4o-mini", "messages": history(40_000, "stall")}).encode()
    big = large_body(args.mb)
    lags: list[float] = []
    health: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        proxy = TestServer(create_app(stall_settings(model.url, summarizer.url, Path(tmp) / "s.db")))
        await proxy.start_server()
        stop = asyncio.Event()
        try:
            async with aiohttp.ClientSession() as http:
                watchers = [asyncio.create_task(watch(lags, stop)),
                            asyncio.create_task(poll_health(http, str(proxy.make_url("/healthz")), health,
                                                            stop))]
                chat = str(proxy.make_url("/v1/chat/completions"))
                outcomes = await asyncio.gather(post(http, chat, compacting), post(http, chat, big))
                stop.set()
                await asyncio.gather(*watchers)
                print(f"compacting request: {outcomes[0]}; {args.mb:g} MB request: {outcomes[1]}; "
                      f"summarizer calls: {len(summarizer.requests)}")
        finally:
            await proxy.close()
            await model.close()
            await summarizer.close()
    return {"loop lag": lags, "/healthz": health}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=10.0, help="size of the large request")
    parser.add_argument("--summarizer-delay", type=float, default=0.5, help="seconds per summary")
    args = parser.parse_args(argv)
    rows = asyncio.run(run(args))
    print(f"{'(ms)':<12}{'n':>6}{'p50':>9}{'p99':>9}{'max':>9}{'total':>9}")
    for name, values in rows.items():
        print(f"{name:<12}{len(values):>6}{pct(values, 50):>9.1f}{pct(values, 99):>9.1f}"
              f"{max(values, default=0):>9.1f}{sum(values):>9.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
