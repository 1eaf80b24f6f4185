"""Added latency of a resent ~100k-token history: the fake upstream direct vs through ctxproxy.

An agent loop over one conversation: each request resends the whole history plus the previous reply
and a new user message (the store holds the history after the warm-up, nothing is compacted). The
same body goes to the fake upstream directly and through ctxproxy, alternately (which one goes first
alternates too), so drift hits both alike; each is its own process on loopback. Added = ctxproxy's
percentile - direct's (as bench/throughput.py). Targets: added p50 <= 5 ms, p99 <= 15 ms.

    python -m bench.resend [--n N] [--tokens N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench.common import HEADERS, MODEL, Server, history, pct, session, start_ctxproxy, start_upstream

TARGETS_MS = {"p50_ms": 5.0, "p99_ms": 15.0}


@dataclass(frozen=True)
class Plan:
    n: int = 300  # timed requests to each target
    warmup: int = 10  # untimed turns first (the first one stores the history)
    tokens: int = 100_000


class Loop:
    """The conversation: the history, then each reply and a new user message appended."""

    def __init__(self, tokens: int) -> None:
        self.messages = history(tokens, " [resend]")
        self.turns = 0

    def body(self) -> bytes:
        return json.dumps({"model": MODEL, "messages": self.messages}).encode()

    def advance(self, answer: dict[str, Any]) -> None:
        self.messages.append({"role": "assistant", "content": answer["choices"][0]["message"]["content"]})
        self.turns += 1
        self.messages.append({"role": "user", "content": f"go on with step {self.turns}"})


async def _post(http: aiohttp.ClientSession, url: str, body: bytes) -> tuple[float, dict[str, Any]]:
    """Milliseconds of one call (the body encoded beforehand) and its answer."""
    began = time.perf_counter()
    async with http.post(url, data=body, headers=HEADERS) as resp:
        raw = await resp.read()
        elapsed = (time.perf_counter() - began) * 1000
        if resp.status != 200:
            raise RuntimeError(f"{url}: {resp.status} {raw[:300]!r}")
    answer: dict[str, Any] = json.loads(raw)
    return elapsed, answer


async def measure(http: aiohttp.ClientSession, direct: Server, proxy: Server,
                  plan: Plan) -> tuple[list[float], list[float]]:
    """Latencies (ms) of the same bodies sent direct and through ctxproxy, turn by turn."""
    loop, direct_ms, proxied_ms = Loop(plan.tokens), list[float](), list[float]()
    for turn in range(plan.warmup + plan.n):
        body = loop.body()
        if turn % 2:
            d, _ = await _post(http, direct.chat_url, body)
            p, answer = await _post(http, proxy.chat_url, body)
        else:
            p, answer = await _post(http, proxy.chat_url, body)
            d, _ = await _post(http, direct.chat_url, body)
        loop.advance(answer)
        if turn >= plan.warmup:
            direct_ms.append(d)
            proxied_ms.append(p)
    return direct_ms, proxied_ms


async def run(plan: Plan) -> dict[str, Any]:
    """Start the fake upstream and ctxproxy, run the loop, stop them; the figures."""
    with tempfile.TemporaryDirectory(prefix="ctxresend-") as tmp:
        work = Path(tmp)
        upstream = start_upstream(work)
        try:
            proxy = start_ctxproxy(work, upstream.url, name="ctx-resend")
            try:
                async with session(4) as http:
                    direct_ms, proxied_ms = await measure(http, upstream, proxy, plan)
            finally:
                proxy.stop()
        finally:
            upstream.stop()
    return summarize(direct_ms, proxied_ms, plan)


def summarize(direct_ms: list[float], proxied_ms: list[float], plan: Plan) -> dict[str, Any]:
    direct = {"p50_ms": pct(direct_ms, 50), "p99_ms": pct(direct_ms, 99)}
    ctx = {"p50_ms": pct(proxied_ms, 50), "p99_ms": pct(proxied_ms, 99)}
    added = {k: ctx[k] - direct[k] for k in direct}
    return {"tokens": plan.tokens, "requests": len(proxied_ms), "direct": direct, "ctxproxy": ctx,
            "added": added, "targets": TARGETS_MS, "met": all(added[k] <= TARGETS_MS[k] for k in TARGETS_MS)}


def table(result: dict[str, Any]) -> str:
    d, c, a, t = result["direct"], result["ctxproxy"], result["added"], result["targets"]
    return "\n".join([
        f"resent {result['tokens'] // 1000}k-token history (agent loop, {result['requests']} requests each; "
        "fake upstream and ctxproxy as separate processes)",
        f"{'target':<10}{'p50 ms':>9}{'p99 ms':>9}",
        f"{'direct':<10}{d['p50_ms']:>9.2f}{d['p99_ms']:>9.2f}",
        f"{'ctxproxy':<10}{c['p50_ms']:>9.2f}{c['p99_ms']:>9.2f}",
        f"added by ctxproxy: p50 {a['p50_ms']:.2f} ms, p99 {a['p99_ms']:.2f} ms "
        f"(targets <= {t['p50_ms']:g} / <= {t['p99_ms']:g} ms: {'met' if result['met'] else 'NOT met'})"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=Plan.n)
    parser.add_argument("--warmup", type=int, default=Plan.warmup)
    parser.add_argument("--tokens", type=int, default=Plan.tokens)
    args = parser.parse_args(argv)
    print(table(asyncio.run(run(Plan(args.n, args.warmup, args.tokens)))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
