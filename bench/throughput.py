"""Proxy overhead side by side: fake upstream direct, through the floor, ctxproxy and LiteLLM's proxy.

Every server is its own process on loopback, all against the same fake upstream process; the floor
is a bare aiohttp forwarder (bench/floor.py), the least a Python proxy costs. For each target: p50/p99
latency of a small request and streaming time-to-first-byte at concurrency 1, requests per second at
concurrency 1 and 32, and the target process's CPU per request (from /proc, over the concurrency-1
requests). Added latency = target p50 - direct p50; the headlines are ctxproxy's added p50 as a
fraction of LiteLLM's (target: at most 0.5) and its CPU per request against the floor's (target: at
most 2x).

    python -m bench.throughput [--n N] [--n32 N] [--ttfb N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import litellm_proxy
from bench.common import (
    MODEL,
    Server,
    cpu_seconds,
    fmt_ratio,
    pct,
    poster,
    ratio,
    run_load,
    session,
    start_ctxproxy,
    start_floor,
    start_upstream,
)

TARGET_RATIO = 0.5  # ctxproxy's added p50 at most half of LiteLLM's
TARGET_CPU_VS_FLOOR = 2.0  # ctxproxy's CPU per small request at most twice the floor's
SMALL = {"model": MODEL, "messages": [{"role": "user", "content": "ping"}]}


@dataclass(frozen=True)
class Counts:
    n: int = 300  # concurrency-1 requests (latency and rps)
    n32: int = 2_000  # concurrency-32 requests
    ttfb: int = 200  # streaming requests
    warmup: int = 20


async def measure_target(url: str, counts: Counts, pid: int) -> dict[str, float]:
    """Latency, TTFB, rps and CPU per request (of process `pid`) of one chat URL."""
    plain, stream = json.dumps(SMALL).encode(), json.dumps({**SMALL, "stream": True}).encode()
    async with session(64) as http:
        call = poster(http, url, plain)
        ttfb_call = poster(http, url, stream, ttfb=True)
        await run_load([call], counts.warmup, 4)
        await run_load([ttfb_call], counts.warmup, 1)
        cpu_before = cpu_seconds(pid)
        c1 = await run_load([call], counts.n, 1)
        cpu_ms = (cpu_seconds(pid) - cpu_before) * 1000 / counts.n
        first = await run_load([ttfb_call], counts.ttfb, 1)
        c32 = await run_load([call], counts.n32, 32)
    return {"p50_ms": pct(c1.latencies_ms, 50), "p99_ms": pct(c1.latencies_ms, 99),
            "ttfb_p50_ms": pct(first.latencies_ms, 50), "ttfb_p99_ms": pct(first.latencies_ms, 99),
            "rps_c1": c1.rps, "rps_c32": c32.rps, "p50_c32_ms": pct(c32.latencies_ms, 50),
            "p99_c32_ms": pct(c32.latencies_ms, 99), "cpu_ms": cpu_ms}


async def run(counts: Counts, with_litellm: bool = True) -> dict[str, Any]:
    """Start the servers, measure every target in turn, stop them; returns the figures."""
    with tempfile.TemporaryDirectory(prefix="ctxbench-") as tmp:
        work = Path(tmp)
        upstream = start_upstream(work)
        servers: list[Server] = [upstream]
        try:
            floor = start_floor(work, upstream.url)
            servers.append(floor)
            ctx = start_ctxproxy(work, upstream.url)
            servers.append(ctx)
            llp = litellm_proxy.start(work, upstream.url) if with_litellm else None
            if llp is not None:
                servers.append(llp)
            targets = {"direct": upstream, "floor": floor, "ctxproxy": ctx, "litellm": llp}
            figures = {name: (await measure_target(s.chat_url, counts, s.proc.pid) if s else None)
                       for name, s in targets.items()}
        finally:
            for server in reversed(servers):
                server.stop()
    return summarize(figures)


def summarize(figures: dict[str, dict[str, float] | None]) -> dict[str, Any]:
    """Add the added-latency figures and the ctxproxy/LiteLLM ratio."""
    direct = figures["direct"]
    assert direct is not None
    added: dict[str, dict[str, float]] = {}
    for name in ("floor", "ctxproxy", "litellm"):
        f = figures.get(name)
        if f is not None:
            added[name] = {"p50_ms": f["p50_ms"] - direct["p50_ms"], "p99_ms": f["p99_ms"] - direct["p99_ms"],
                           "ttfb_p50_ms": f["ttfb_p50_ms"] - direct["ttfb_p50_ms"]}
    vs = None
    if "litellm" in added:
        vs = ratio(added["ctxproxy"]["p50_ms"], added["litellm"]["p50_ms"])
    floor, ctx = figures.get("floor"), figures.get("ctxproxy")
    cpu_vs_floor = ratio(ctx["cpu_ms"], floor["cpu_ms"]) if floor and ctx else None
    return {"targets": figures, "added": added, "ctxproxy_vs_litellm_added_p50": vs,
            "target_ratio": TARGET_RATIO, "litellm_skipped": figures.get("litellm") is None,
            "ctxproxy_cpu_vs_floor": cpu_vs_floor, "target_cpu_vs_floor": TARGET_CPU_VS_FLOOR}


def table(result: dict[str, Any]) -> str:
    """The side-by-side table plus the added-latency lines and the headline ratio."""
    head = (f"{'target':<10}{'p50 ms':>9}{'p99 ms':>9}{'ttfb p50':>10}{'ttfb p99':>10}"
            f"{'rps c1':>9}{'rps c32':>9}{'p50 c32':>9}{'cpu ms':>8}")
    lines = ["proxy overhead (small request; fake upstream, ctxproxy and LiteLLM proxy as separate "
             "processes)", head]
    for name, f in result["targets"].items():
        if f is None:
            lines.append(f"{name:<10}" + litellm_proxy.SKIPPED)
            continue
        lines.append(f"{name:<10}{f['p50_ms']:>9.2f}{f['p99_ms']:>9.2f}{f['ttfb_p50_ms']:>10.2f}"
                     f"{f['ttfb_p99_ms']:>10.2f}{f['rps_c1']:>9.0f}{f['rps_c32']:>9.0f}{f['p50_c32_ms']:>9.2f}"
                     f"{f['cpu_ms']:>8.2f}")
    direct = result["targets"]["direct"]
    for name, a in result["added"].items():
        f = result["targets"][name]
        rps = fmt_ratio(ratio(f["rps_c32"], direct["rps_c32"]))
        lines.append(f"added by {name}: p50 {a['p50_ms']:.2f} ms, p99 {a['p99_ms']:.2f} ms, "
                     f"ttfb p50 {a['ttfb_p50_ms']:.2f} ms; rps c32 {rps} of direct")
    vs = result["ctxproxy_vs_litellm_added_p50"]
    if vs is not None:
        verdict = "ok" if vs <= TARGET_RATIO else "OVER"
        lines.append(f"ctxproxy added p50 / LiteLLM added p50 = {fmt_ratio(vs)} "
                     f"(target <= {TARGET_RATIO:g}x: {verdict})")
    cpu = result.get("ctxproxy_cpu_vs_floor")
    if cpu is not None:
        verdict = "ok" if cpu <= TARGET_CPU_VS_FLOOR else "OVER"
        lines.append(f"ctxproxy CPU per small request / the floor's = {fmt_ratio(cpu)} "
                     f"(target <= {TARGET_CPU_VS_FLOOR:g}x: {verdict})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=Counts.n)
    parser.add_argument("--n32", type=int, default=Counts.n32)
    parser.add_argument("--ttfb", type=int, default=Counts.ttfb)
    parser.add_argument("--no-litellm", action="store_true", help="skip LiteLLM's proxy")
    args = parser.parse_args(argv)
    result = asyncio.run(run(Counts(args.n, args.n32, args.ttfb), with_litellm=not args.no_litellm))
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
