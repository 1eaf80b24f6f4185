"""RSS of the ctxproxy process after warm-up and after 10k small requests (concurrency 32).

1000 conversations grow turn by turn (each request resends its conversation plus the previous reply
and a new user message), so the store and every per-conversation structure are exercised. RSS is
read from /proc after warm-up and every `sample_every` requests; the growth is printed in MiB and
per 1k requests. The run is bounded by `max_s` (it fails rather than hang).

    python -m bench.memory [--requests N] [--conversations N] [--concurrency N]
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

from bench.common import HEADERS, MODEL, Server, rss_mb, session, start_ctxproxy, start_upstream


@dataclass(frozen=True)
class Plan:
    requests: int = 10_000
    warmup: int = 1_000
    conversations: int = 1_000  # ~11 turns each: bounded time on 2 cores, every request a new turn
    concurrency: int = 32
    sample_every: int = 1_000
    max_s: float = 240.0


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


async def drive(http: aiohttp.ClientSession, proxy: Server, pool: Pool, n: int, plan: Plan,
                samples: list[tuple[int, float]], done0: int) -> None:
    """`n` requests from `plan.concurrency` workers; worker w cycles over conversations w, w+c, ..."""
    counter = [0]

    async def worker(w: int) -> None:
        mine = list(range(w, len(pool.histories), plan.concurrency)) or [w % len(pool.histories)]
        k = 0
        while counter[0] < n:
            counter[0] += 1
            done = done0 + counter[0]
            await pool.turn(http, proxy.chat_url, mine[k % len(mine)])
            k += 1
            if done % plan.sample_every == 0:
                samples.append((done, rss_mb(proxy.proc.pid)))

    await asyncio.gather(*(worker(w) for w in range(min(plan.concurrency, len(pool.histories)))))


async def run(plan: Plan) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ctxbench-") as tmp:
        upstream = start_upstream(Path(tmp))
        proxy = start_ctxproxy(Path(tmp), upstream.url)
        try:
            start_rss = rss_mb(proxy.proc.pid)
            pool, samples = Pool(plan.conversations), list[tuple[int, float]]()
            async with session(plan.concurrency * 2) as http:
                await drive(http, proxy, pool, plan.warmup, plan, [], 0)
                warm = rss_mb(proxy.proc.pid)
                began = time.perf_counter()
                await asyncio.wait_for(drive(http, proxy, pool, plan.requests, plan, samples, 0), plan.max_s)
                seconds = time.perf_counter() - began
            after = rss_mb(proxy.proc.pid)
        finally:
            proxy.stop()
            upstream.stop()
    growth = after - warm
    return {"requests": plan.requests, "warmup": plan.warmup, "conversations": plan.conversations,
            "concurrency": plan.concurrency, "rss_start_mb": start_rss, "rss_warm_mb": warm,
            "rss_after_mb": after, "growth_mb": growth,
            "growth_mb_per_1k": growth * 1000 / plan.requests if plan.requests else 0.0,
            "seconds": seconds, "rps": plan.requests / seconds if seconds else 0.0,
            "samples": [{"requests": r, "rss_mb": m} for r, m in samples]}


def table(r: dict[str, Any]) -> str:
    trend = " ".join(f"{s['rss_mb']:.0f}" for s in r["samples"])
    every = r["samples"][1]["requests"] - r["samples"][0]["requests"] if len(r["samples"]) > 1 else 0
    return "\n".join([
        f"memory: ctxproxy RSS over {r['requests']} requests ({r['conversations']} conversations, "
        f"concurrency {r['concurrency']}, after {r['warmup']} warm-up)",
        f"rss at start {r['rss_start_mb']:.1f} MiB, after warm-up {r['rss_warm_mb']:.1f} MiB, "
        f"after {r['requests']} requests {r['rss_after_mb']:.1f} MiB",
        f"growth {r['growth_mb']:+.1f} MiB ({r['growth_mb_per_1k']:+.2f} MiB per 1k requests); "
        f"{r['seconds']:.1f} s, {r['rps']:.0f} req/s",
        f"rss every {every} requests (MiB): {trend}"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=Plan.requests)
    parser.add_argument("--conversations", type=int, default=Plan.conversations)
    parser.add_argument("--concurrency", type=int, default=Plan.concurrency)
    args = parser.parse_args(argv)
    plan = Plan(requests=args.requests, conversations=args.conversations, concurrency=args.concurrency)
    print(table(asyncio.run(run(plan))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
