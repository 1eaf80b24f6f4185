"""RSS of the ctxproxy process over 20k small requests (concurrency 32), once its caches are full.

The server's config routes the chat model over OpenAI's wire format only (the traffic is chat), so
litellm is not loaded; the idle RSS of the same config plus an `anthropic/` entry (litellm loaded,
~180 MiB more) is read beside it.

1000 conversations grow turn by turn (each request resends its conversation plus the previous reply
and a new user message), so the store and every per-conversation structure are exercised. Warm-up:
`warmup` requests, then more of the same traffic until every bounded cache /metrics reports
(`ctxproxy_cache_bytes` against `ctxproxy_cache_limit_bytes`) is full, at most `fill_max` more: a
server that has run for a while has full caches, and what grows after that is what a leak would be.
RSS is read from /proc/PID/status after warm-up and every `sample_every` requests, split into
anonymous memory (RssAnon: Python objects and malloc arenas, where a leak shows) and file-backed
pages (RssFile: code, plus SQLite's memory-mapped database when `store.mmap_mib` maps it). Growth is
printed in MiB per 1k requests, plus a plateau check: the growth over the second half of the run
against the first half (a leak grows as fast in both; a cache filling up grows in the first only).
The run is bounded by `max_s` (it fails rather than hang). Beside it, LiteLLM's proxy (the peer,
when `make bench-deps` installed it) takes the same traffic, `warmup + requests` requests, and its RSS
is read the same way: ctxproxy's RSS at the end against LiteLLM's at its end (target: at most 1.5x).

    python -m bench.memory [--requests N] [--conversations N] [--concurrency N] [--mmap-mib N]
                           [--no-litellm]
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

from bench import litellm_proxy
from bench.common import (
    HEADERS,
    MODEL,
    Server,
    mapped_mb,
    rss_mb,
    rss_split,
    session,
    start_ctxproxy,
    start_upstream,
    tree_rss_mb,
)
from config.settings import StoreSettings

TARGET_MB_PER_1K = 0.1  # memory stays flat: the proxy runs for months
TARGET_PEER_RATIO = 1.5  # ctxproxy's RSS at the end, at most this times LiteLLM's proxy's
FULL = 0.95  # a cache holding this share of its bound is full (whole entries never fit exactly)
Sample = dict[str, float]
Fill = dict[str, tuple[float, float]]  # cache -> (bytes held, bound in bytes)


@dataclass(frozen=True)
class Plan:
    requests: int = 20_000
    warmup: int = 1_000
    conversations: int = 1_000  # ~21 turns each: bounded time on 2 cores, every request a new turn
    concurrency: int = 32
    sample_every: int = 1_000
    max_s: float = 480.0
    fill_max: int = 20_000  # warm-up requests past `warmup` spent filling the caches, at most
    fill_step: int = 500  # /metrics read every so many warm-up requests
    mmap_mib: int = StoreSettings.mmap_mib  # store.mmap_mib and store.cache_mib of the served store
    cache_mib: int = StoreSettings.cache_mib
    peer: bool = True  # LiteLLM's proxy takes the same traffic too (when it is installed)


class Pool:
    """The conversations, each owned by one worker at a time (its turns stay in order)."""

    def __init__(self, n: int) -> None:
        self.histories = [[{"role": "system", "content": f"Memory bench conversation {i}."},
                           {"role": "user", "content": f"conversation {i}: first question"}]
                          for i in range(n)]

    async def turn(self, http: aiohttp.ClientSession, url: str, i: int) -> None:
        msgs = self.histories[i]
        body = json.dumps({"model": MODEL, "messages": msgs}).encode()
        async with http.post(url, data=body, headers=HEADERS) as resp:
            if resp.status != 200:
                raise RuntimeError(f"{resp.status}: {(await resp.text())[:300]}")
            answer = await resp.json()
        msgs.append({"role": "assistant", "content": answer["choices"][0]["message"].get("content") or ""})
        msgs.append({"role": "user", "content": f"conversation {i}: follow-up {len(msgs) // 2}"})


def sample(proxy: Server, db: Path | None) -> Sample:
    """RSS split (MiB) plus the resident part of the store's memory map and the store's file size;
    for a server without a store (the peer), RSS of its whole process tree."""
    if db is None:
        return {"rss": tree_rss_mb(proxy.proc.pid)}
    size = sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())
    return {**rss_split(proxy.proc.pid), "db_mapped": mapped_mb(proxy.proc.pid, db), "db_file": size / 2**20}


async def drive(http: aiohttp.ClientSession, proxy: Server, pool: Pool, n: int, plan: Plan,
                samples: list[Sample], db: Path | None) -> None:
    """`n` requests from `plan.concurrency` workers; worker w cycles over conversations w, w+c, ..."""
    counter = [0]

    async def worker(w: int) -> None:
        mine = list(range(w, len(pool.histories), plan.concurrency)) or [w % len(pool.histories)]
        k = 0
        while counter[0] < n:
            counter[0] += 1
            done = counter[0]
            await pool.turn(http, proxy.chat_url, mine[k % len(mine)])
            k += 1
            if done % plan.sample_every == 0:
                samples.append({"requests": done, **sample(proxy, db)})

    await asyncio.gather(*(worker(w) for w in range(min(plan.concurrency, len(pool.histories)))))


async def cache_fill(http: aiohttp.ClientSession, proxy: Server) -> Fill:
    """The bounded caches as /metrics reports them: name -> (bytes held, bound)."""
    async with http.get(proxy.url.removesuffix("/v1") + "/metrics") as resp:
        text = await resp.text()
    found: dict[str, dict[str, float]] = {"ctxproxy_cache_bytes": {}, "ctxproxy_cache_limit_bytes": {}}
    for line in text.splitlines():
        name, _, rest = line.partition('{cache="')
        if name in found:
            cache, _, value = rest.partition('"} ')
            found[name][cache] = float(value)
    held, bound = found.values()
    return {cache: (held[cache], bound.get(cache, 0.0)) for cache in held}


FILLED = ("chain_hashes", "forwarded_hashes", "prefix_rows")  # what `is_full` waits for


def is_full(fill: Fill) -> bool:
    """The caches this traffic fills in proportion to it are full (chat traffic leaves the Messages
    route's empty; the small ones, such as `idle_steps`, never fill)."""
    return all(held >= FULL * bound for name, (held, bound) in fill.items() if name in FILLED)


async def warm_up(http: aiohttp.ClientSession, proxy: Server, pool: Pool, plan: Plan, db: Path) -> int:
    """`plan.warmup` requests, then more until every cache is full (or `plan.fill_max` more)."""
    done = plan.warmup
    await drive(http, proxy, pool, plan.warmup, plan, [], db)
    while done < plan.warmup + plan.fill_max and not is_full(await cache_fill(http, proxy)):
        await drive(http, proxy, pool, plan.fill_step, plan, [], db)
        done += plan.fill_step
    return done


async def run(plan: Plan) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ctxbench-") as tmp:
        upstream = start_upstream(Path(tmp))
        with_litellm = idle_rss(Path(tmp), upstream.url)
        proxy = start_ctxproxy(Path(tmp), upstream.url, store={"mmap_mib": plan.mmap_mib,
                                                               "cache_mib": plan.cache_mib}, claude=False)
        db = Path(tmp) / "ctxproxy.db"
        try:
            start = sample(proxy, db)
            pool, samples = Pool(plan.conversations), list[Sample]()
            async with session(plan.concurrency * 2) as http:
                warmed = await warm_up(http, proxy, pool, plan, db)
                warm, warm_fill = sample(proxy, db), await cache_fill(http, proxy)
                began = time.perf_counter()
                await asyncio.wait_for(drive(http, proxy, pool, plan.requests, plan, samples, db), plan.max_s)
                seconds = time.perf_counter() - began
                after, after_fill = sample(proxy, db), await cache_fill(http, proxy)
        finally:
            proxy.stop()
            upstream.stop()
    return {"requests": plan.requests, "warmup": warmed, "conversations": plan.conversations,
            "concurrency": plan.concurrency, "mmap_mib": plan.mmap_mib, "cache_mib": plan.cache_mib,
            "rss_start_mb": start["rss"], "rss_idle_with_litellm_mb": with_litellm,
            "rss_warm_mb": warm["rss"],
            "rss_after_mb": after["rss"], "start": start, "warm": warm, "after": after,
            "caches_warm": warm_fill, "caches_after": after_fill, "caches_full": is_full(warm_fill),
            **growth(warm, after, plan.requests), "plateau": plateau(warm, samples, plan.requests),
            "trend_mb_per_1k": slope(samples),
            "second_half_trend_mb_per_1k": slope(samples[len(samples) // 2:]),
            "target_mb_per_1k": TARGET_MB_PER_1K, "seconds": seconds,
            "rps": plan.requests / seconds if seconds else 0.0, "samples": samples,
            "peer": await peer(plan, plan.warmup + plan.requests) if plan.peer else None}


def idle_rss(workdir: Path, upstream_url: str) -> float:
    """RSS (MiB) of a ready ctxproxy whose config also has an `anthropic/` entry, so litellm is
    loaded: what the measured server (OpenAI-wire entries only, chat traffic) leaves out."""
    server = start_ctxproxy(workdir, upstream_url, name="ctxproxy-litellm")
    try:
        return rss_mb(server.proc.pid)
    finally:
        server.stop()


async def peer(plan: Plan, requests: int) -> dict[str, Any] | None:
    """LiteLLM's proxy's RSS (its process tree) at start and after `requests` requests of the same
    traffic, sampled as ctxproxy's; None when it is not installed."""
    with tempfile.TemporaryDirectory(prefix="ctxbench-peer-") as tmp:
        upstream = start_upstream(Path(tmp))
        server = litellm_proxy.start(Path(tmp), upstream.url)
        try:
            if server is None:
                return None
            start, samples = sample(server, None), list[Sample]()
            async with session(plan.concurrency * 2) as http:
                began = time.perf_counter()
                await asyncio.wait_for(drive(http, server, Pool(plan.conversations), requests, plan,
                                             samples, None), plan.max_s)
                seconds = time.perf_counter() - began
            return {"name": "litellm", "requests": requests, "rss_start_mb": start["rss"],
                    "rss_after_mb": sample(server, None)["rss"], "trend_mb_per_1k": slope(samples),
                    "seconds": seconds, "samples": samples}
        finally:
            if server is not None:
                server.stop()
            upstream.stop()


def peer_ratio(r: dict[str, Any]) -> float | None:
    """ctxproxy's RSS at the end over the peer's at its end."""
    peer_mb = r["peer"]["rss_after_mb"] if r.get("peer") else 0.0
    return r["rss_after_mb"] / peer_mb if peer_mb else None


def peer_text(r: dict[str, Any]) -> str:
    """One line: the peer's RSS and the ratio against the target, or why there is none."""
    p, ratio = r.get("peer"), peer_ratio(r)
    if not p or ratio is None:
        return "beside LiteLLM's proxy: " + litellm_proxy.SKIPPED
    verdict = "met" if ratio <= TARGET_PEER_RATIO else "not met"
    return (f"LiteLLM's proxy after {p['requests']} requests of the same traffic: "
            f"{p['rss_after_mb']:.1f} MiB "
            f"(start {p['rss_start_mb']:.1f}, trend {per_1k(p['trend_mb_per_1k'])} MiB per 1k, "
            f"{p['requests'] / p['seconds']:.0f} req/s); ctxproxy/LiteLLM RSS {ratio:.2f}x "
            f"(target <= {TARGET_PEER_RATIO:g}x: {verdict})")


def growth(warm: Sample, after: Sample, requests: int) -> dict[str, float]:
    """Growth from warm-up to the end, in MiB and MiB per 1k requests: all of RSS, anon, file, the
    store's memory map, and all but that map."""
    per_1k = 1000 / requests if requests else 0.0
    grown = after["rss"] - warm["rss"]
    out: dict[str, float] = {"growth_mb": grown, "growth_mb_per_1k": grown * per_1k}
    for part in ("anon", "file", "db_mapped"):
        out[f"{part}_growth_mb"] = after[part] - warm[part]
        out[f"{part}_growth_mb_per_1k"] = (after[part] - warm[part]) * per_1k
    unmapped = out["growth_mb"] - out["db_mapped_growth_mb"]  # all but the store's memory map
    out |= {"unmapped_growth_mb": unmapped, "unmapped_growth_mb_per_1k": unmapped * per_1k}
    return out


def slope(samples: list[Sample], part: str = "rss") -> float | None:
    """Least-squares growth of `part` in MiB per 1k requests over the samples: a trend that one
    sample taken at a high or low moment (freed memory not yet given back, say) does not swing."""
    if len(samples) < 2:
        return None
    xs, ys = [s["requests"] for s in samples], [s[part] for s in samples]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mx) ** 2 for x in xs)
    return 1000 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / spread if spread else None


def plateau(warm: Sample, samples: list[Sample], requests: int) -> dict[str, float | None]:
    """Growth over the first and the second half of the run (MiB, RSS and anon) and their ratio."""
    half = next((s for s in samples if s["requests"] >= requests / 2), None)
    if half is None or not samples:
        return {f"{p}{h}_mb": None for p in ("", "anon_", "unmapped_") for h in ("first", "second")}
    last = samples[-1]

    def unmapped(s: Sample) -> float:
        return s["rss"] - s["db_mapped"]

    return {"first_mb": half["rss"] - warm["rss"], "second_mb": last["rss"] - half["rss"],
            "anon_first_mb": half["anon"] - warm["anon"], "anon_second_mb": last["anon"] - half["anon"],
            "unmapped_first_mb": unmapped(half) - unmapped(warm),
            "unmapped_second_mb": unmapped(last) - unmapped(half)}


def met(r: dict[str, Any]) -> bool:
    """The target is judged on the least-squares trend over every sample: RSS moves 1-2 MiB between
    samples as freed memory is given back or not (about 0.1 MiB per 1k over 20k requests), so the
    difference between two single samples (warm-up and end) swings by as much as the target."""
    trend = r["trend_mb_per_1k"]
    return trend is not None and trend <= r["target_mb_per_1k"]


def table(r: dict[str, Any]) -> str:
    every = r["samples"][1]["requests"] - r["samples"][0]["requests"] if len(r["samples"]) > 1 else 0
    p, target = r["plateau"], r["target_mb_per_1k"]

    def trend(part: str) -> str:
        return " ".join(f"{s[part]:.0f}" for s in r["samples"])

    def halves(first: float | None, second: float | None) -> str:
        return "n/a" if first is None or second is None else f"{first:+.1f} then {second:+.1f} MiB"

    return "\n".join([
        f"memory: ctxproxy RSS over {r['requests']} requests ({r['conversations']} conversations, "
        f"concurrency {r['concurrency']}, after {r['warmup']} warm-up; store.cache_mib {r['cache_mib']}, "
        f"store.mmap_mib {r['mmap_mib']})",
        f"caches after warm-up ({'full' if r['caches_full'] else 'NOT full'}): "
        f"{fill_text(r['caches_warm'])}; at the end: {fill_text(r['caches_after'])}",
        f"rss at start {r['rss_start_mb']:.1f} MiB ({r['rss_idle_with_litellm_mb']:.1f} with an anthropic/ "
        f"entry, litellm loaded), after warm-up {r['rss_warm_mb']:.1f} MiB "
        f"(anon {r['warm']['anon']:.1f}, file {r['warm']['file']:.1f}), after {r['requests']} requests "
        f"{r['rss_after_mb']:.1f} MiB (anon {r['after']['anon']:.1f}, file {r['after']['file']:.1f})",
        f"growth from warm-up to the end {r['growth_mb']:+.1f} MiB ({r['growth_mb_per_1k']:+.3f} MiB per 1k "
        f"requests); anon {r['anon_growth_mb_per_1k']:+.3f}, file "
        f"{r['file_growth_mb_per_1k']:+.3f} MiB per 1k; {r['seconds']:.1f} s, {r['rps']:.0f} req/s",
        f"store mmap: {r['db_mapped_growth_mb']:+.1f} MiB resident ({r['after']['db_mapped']:.1f} MiB of a "
        f"{r['after']['db_file']:.1f} MiB store, capped by store.mmap_mib {r['mmap_mib']} MiB); all but it: "
        f"{r['unmapped_growth_mb']:+.1f} MiB ({r['unmapped_growth_mb_per_1k']:+.3f} MiB per 1k)",
        f"trend (least squares over the samples): {per_1k(r['trend_mb_per_1k'])} MiB per 1k requests "
        f"(target <= {target:g}: {'ok' if met(r) else 'OVER'}), "
        f"{per_1k(r['second_half_trend_mb_per_1k'])} over the second half",
        f"plateau (first half, then second half): rss {halves(p['first_mb'], p['second_mb'])}; "
        f"anon {halves(p['anon_first_mb'], p['anon_second_mb'])}; all but the store mmap "
        f"{halves(p['unmapped_first_mb'], p['unmapped_second_mb'])}",
        peer_text(r),
        f"rss every {every} requests (MiB): {trend('rss')}",
        f"anon every {every} requests (MiB): {trend('anon')}"])


def per_1k(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.3f}"


def fill_text(fill: Fill) -> str:
    """`name held/bound MiB` for each cache."""
    return ", ".join(f"{name} {held / 2**20:.1f}/{bound / 2**20:.1f} MiB"
                     for name, (held, bound) in sorted(fill.items())) or "none reported"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=Plan.requests)
    parser.add_argument("--conversations", type=int, default=Plan.conversations)
    parser.add_argument("--concurrency", type=int, default=Plan.concurrency)
    parser.add_argument("--mmap-mib", type=int, default=Plan.mmap_mib, help="store.mmap_mib of the server")
    parser.add_argument("--cache-mib", type=int, default=Plan.cache_mib, help="store.cache_mib of the server")
    parser.add_argument("--no-litellm", action="store_true", help="leave LiteLLM's proxy out")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args(argv)
    plan = Plan(requests=args.requests, conversations=args.conversations, concurrency=args.concurrency,
                mmap_mib=args.mmap_mib, cache_mib=args.cache_mib, peer=not args.no_litellm)
    result = asyncio.run(run(plan))
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
