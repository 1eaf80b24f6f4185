"""Added latency of the proxy versus calling the same fake upstream directly (one process, loopback).

Scenarios, side by side: a small request, a ~100k-token history resent in full (the store already
holds it, as in a real agent loop), and streaming time-to-first-byte. Prints p50/p99 and the
proxy's added p50 against the targets (< 3 ms small, < 25 ms for 100k).

    python -m bench.proxy_bench [--small N] [--large N] [--ttfb N] [--tokens N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import aiohttp  # noqa: E402
from aiohttp.test_utils import TestServer  # noqa: E402

from bench.common import history, pct, poster, timed  # noqa: E402

TARGETS_MS = {"small": 3.0, "100k history": 25.0}


@dataclass(frozen=True)
class Row:
    name: str
    direct: list[float]
    proxied: list[float]

    def line(self) -> str:
        d50, d99 = pct(self.direct, 50), pct(self.direct, 99)
        p50, p99 = pct(self.proxied, 50), pct(self.proxied, 99)
        target = TARGETS_MS.get(self.name)
        verdict = "" if target is None else (" ok" if p50 - d50 < target else " OVER") + f" (<{target:g})"
        return (f"{self.name:<16}{d50:>9.2f}{d99:>9.2f}{p50:>9.2f}{p99:>9.2f}"
                f"{p50 - d50:>10.2f}{p50 / d50 if d50 else 0:>8.2f}x{verdict}")


async def scenario(http: aiohttp.ClientSession, name: str, direct_url: str, proxy_url: str,
                   body: dict[str, Any], n: int, ttfb: bool = False) -> Row:
    raw = json.dumps(body).encode()
    direct = poster(http, direct_url, json.dumps({**body, "model": "gpt-4o-mini"}).encode(), ttfb)
    proxied = poster(http, proxy_url, raw, ttfb)
    await timed(3, direct)
    await timed(3, proxied)  # warm-up: first resend stores the history, tokenizer caches load
    d, p = [], []
    for _ in range(n):  # interleaved so drift hits both sides alike
        d += await timed(1, direct)
        p += await timed(1, proxied)
    return Row(name, d, p)


def bench_settings(upstream_url: str, store_path: Path, cache_mib: int | None = None,
                   mmap_mib: int | None = None) -> Any:
    from config.settings import (
        CompactionSettings,
        LiteLLMParams,
        ModelEntry,
        ServerSettings,
        Settings,
        StoreSettings,
    )

    # A window large enough that a 100k history is forwarded as-is: this measures the proxy's
    # steady-state cost on resends, not the summarizer.
    compaction = CompactionSettings(background=False)
    default = StoreSettings()
    store = StoreSettings(path=str(store_path),
                          cache_mib=default.cache_mib if cache_mib is None else cache_mib,
                          mmap_mib=default.mmap_mib if mmap_mib is None else mmap_mib)
    model = ModelEntry("gpt-4o-mini", LiteLLMParams("openai/gpt-4o-mini", upstream_url), 1_000_000,
                       compaction)
    return Settings(model_list=(model,), compaction=compaction,
                    store=store,
                    server=ServerSettings(log_level="warning"))


async def run(args: argparse.Namespace) -> list[Row]:
    from proxy.app import create_app
    from tests.fakes.upstream import FakeUpstream

    fake = await FakeUpstream().start()
    with tempfile.TemporaryDirectory() as tmp:
        settings = bench_settings(fake.url, Path(tmp) / "bench.db", args.cache_mib, args.mmap_mib)
        proxy = TestServer(create_app(settings))
        await proxy.start_server()
        try:
            async with aiohttp.ClientSession() as http:
                direct = fake.url + "/chat/completions"
                proxied = str(proxy.make_url("/v1/chat/completions"))
                small = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "ping"}]}
                large = {"model": "gpt-4o-mini", "messages": history(args.tokens)}
                return [
                    await scenario(http, "small", direct, proxied, small, args.small),
                    await scenario(http, "100k history", direct, proxied, large, args.large),
                    await scenario(http, "stream TTFB", direct, proxied, {**small, "stream": True},
                                   args.ttfb, ttfb=True),
                ]
        finally:
            await proxy.close()
            await fake.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=300, help="iterations, small request")
    parser.add_argument("--large", type=int, default=30, help="iterations, ~100k-token history")
    parser.add_argument("--ttfb", type=int, default=200, help="iterations, streaming TTFB")
    parser.add_argument("--tokens", type=int, default=100_000, help="history size in tokens")
    parser.add_argument("--cache-mib", type=int, help="store.cache_mib (default: the setting's default)")
    parser.add_argument("--mmap-mib", type=int, help="store.mmap_mib (default: the setting's default)")
    args = parser.parse_args(argv)
    rows = asyncio.run(run(args))
    print(f"{'scenario (ms)':<16}{'dir p50':>9}{'dir p99':>9}{'prx p50':>9}{'prx p99':>9}"
          f"{'added p50':>10}{'ratio':>9}")
    for row in rows:
        print(row.line())
    over = [r.name for r in rows if r.name in TARGETS_MS
            and pct(r.proxied, 50) - pct(r.direct, 50) >= TARGETS_MS[r.name]]
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())


