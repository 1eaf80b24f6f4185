"""Per-request CPU of the ctxproxy process as the resent history grows (1k .. 200k tokens).

An agent loop: each request resends the whole history plus the previous reply and one new user
message; the store already holds the history (warm-up requests ingest it). CPU is the proxy
process's user+system time from /proc, divided by the requests. Two series: a window large enough
that nothing is compacted (pass-through + store path), and a 32k window with `local/extractive`
where compaction applies (steady state after the first compaction). Linear = the µs per 1k tokens
stays flat, i.e. its ratio to the 1k case stays near (or below) 1.

    python -m bench.cpu_scaling [--sizes 1000,10000,...] [--min-cpu S]
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

from bench.common import (
    MODEL,
    Server,
    cpu_seconds,
    history,
    pct,
    post_json,
    session,
    start_ctxproxy,
    start_upstream,
)

SIZES = (1_000, 10_000, 50_000, 100_000, 200_000)
SERIES = {"passthrough": (1_000_000, False), "compacting-32k": (32_000, True)}


@dataclass(frozen=True)
class Plan:
    sizes: tuple[int, ...] = SIZES
    min_requests: int = 5
    max_requests: int = 40
    min_cpu_s: float = 0.3  # keep sampling until this much proxy CPU is spent (10 ms /proc ticks)
    warmup: int = 3
    settle_s: float = 0.3  # let background compaction from the warm-up finish


class Conversation:
    """A growing history: each turn appends the previous reply and a new user message."""

    def __init__(self, tokens: int, tag: str) -> None:
        self.messages = history(tokens, tag)
        self.turn = 0

    def body(self) -> bytes:
        return json.dumps({"model": MODEL, "messages": self.messages}).encode()

    def advance(self, answer: dict[str, Any]) -> None:
        reply = answer["choices"][0]["message"]
        self.messages.append({"role": "assistant", "content": reply.get("content") or ""})
        self.turn += 1
        self.messages.append({"role": "user", "content": f"next step {self.turn}, please"})


async def _send(http: aiohttp.ClientSession, url: str, conv: Conversation) -> float:
    began = time.perf_counter()
    async with http.post(url, data=conv.body(), headers={"Content-Type": "application/json",
                                                          "Authorization": "Bearer sk-bench-cpu"}) as resp:
        if resp.status != 200:
            raise RuntimeError(f"{resp.status}: {(await resp.text())[:300]}")
        answer = await resp.json()
    conv.advance(answer)
    return (time.perf_counter() - began) * 1000


async def point(http: aiohttp.ClientSession, proxy: Server, tokens: int, plan: Plan) -> dict[str, float]:
    """CPU per request at one history size (after warm-up and settling)."""
    conv = Conversation(tokens, f" [{tokens}]")
    for _ in range(plan.warmup):
        await _send(http, proxy.chat_url, conv)
    await asyncio.sleep(plan.settle_s)
    pid = proxy.proc.pid
    start, walls = cpu_seconds(pid), list[float]()
    while len(walls) < plan.max_requests and (
            len(walls) < plan.min_requests or cpu_seconds(pid) - start < plan.min_cpu_s):
        walls.append(await _send(http, proxy.chat_url, conv))
    cpu_ms = (cpu_seconds(pid) - start) * 1000 / len(walls)
    return {"tokens": tokens, "requests": len(walls), "cpu_ms": cpu_ms,
            "us_per_1k_tokens": cpu_ms * 1000 / (tokens / 1000), "wall_p50_ms": pct(walls, 50)}


async def series(work: Path, upstream: Server, name: str, plan: Plan) -> list[dict[str, float]]:
    """One proxy process (its own store) measured at every size, smallest first."""
    window, extractive = SERIES[name]
    proxy = start_ctxproxy(work, upstream.url, window=window, extractive=extractive, name=f"ctx-{name}")
    try:
        async with session(4) as http:
            hello = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
            await post_json(http, proxy.chat_url, hello)
            points = [await point(http, proxy, size, plan) for size in plan.sizes]
    finally:
        proxy.stop()
    return with_slopes(points)


def with_slopes(points: list[dict[str, float]]) -> list[dict[str, float]]:
    """Add the ratio to the first (smallest) size and the marginal µs per 1k tokens between sizes.

    A linear cost a + b*tokens shows as a flat marginal column (b) and a falling total µs/1k.
    """
    base = points[0]
    for prev, p in zip([None, *points], points, strict=False):
        per_1k = base["us_per_1k_tokens"]
        p["ratio_to_first"] = p["us_per_1k_tokens"] / per_1k if per_1k else 0.0
        p["cpu_vs_first"] = p["cpu_ms"] / base["cpu_ms"] if base["cpu_ms"] else 0.0
        grown = (p["tokens"] - prev["tokens"]) / 1000 if prev else 0
        p["marginal_us_per_1k"] = (p["cpu_ms"] - prev["cpu_ms"]) * 1000 / grown if prev and grown else 0.0
    return points


def fit(points: list[dict[str, float]]) -> tuple[float, float]:
    """Least-squares cpu_ms = a + b * tokens; returns (a ms, b µs per 1k tokens)."""
    xs, ys = [p["tokens"] / 1000 for p in points], [p["cpu_ms"] for p in points]
    n, mx, my = len(xs), sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if n > 1 and var else 0.0
    return my - b * mx, b * 1000


async def run(plan: Plan) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ctxbench-") as tmp:
        upstream = start_upstream(Path(tmp))
        try:
            out = {name: await series(Path(tmp), upstream, name, plan) for name in SERIES}
        finally:
            upstream.stop()
    return {"sizes": list(plan.sizes), "series": out,
            "fit": {name: dict(zip(("fixed_ms", "us_per_1k_tokens"), fit(points), strict=True))
                    for name, points in out.items()}}


def table(result: dict[str, Any]) -> str:
    lines = ["per-request CPU of the ctxproxy process vs resent history size "
             "(agent loop, history already stored)"]
    for name, points in result["series"].items():
        lines.append(f"[{name}]")
        lines.append(f"{'tokens':>9}{'reqs':>6}{'cpu ms/req':>12}{'cpu vs 1st':>11}{'µs/1k tok':>11}"
                     f"{'vs 1st':>8}{'marginal µs/1k':>16}{'wall p50':>10}")
        for p in points:
            lines.append(f"{p['tokens']:>9}{p['requests']:>6}{p['cpu_ms']:>12.2f}{p['cpu_vs_first']:>10.2f}x"
                         f"{p['us_per_1k_tokens']:>11.1f}{p['ratio_to_first']:>7.2f}x"
                         f"{p['marginal_us_per_1k']:>16.1f}{p['wall_p50_ms']:>10.2f}")
        f = result["fit"][name]
        lines.append(f"  linear fit: cpu ms/req = {f['fixed_ms']:.2f} + {f['us_per_1k_tokens']:.1f} µs "
                     "x (history tokens / 1k)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--min-cpu", type=float, default=Plan.min_cpu_s, help="seconds of CPU per point")
    args = parser.parse_args(argv)
    plan = Plan(sizes=tuple(int(s) for s in args.sizes.split(",")), min_cpu_s=args.min_cpu)
    print(table(asyncio.run(run(plan))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
