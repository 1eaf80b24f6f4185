"""An imported history beside another client: how long the import waits, and how long the other waits.

An agent resuming a session sends its whole history in one request. One client imports N messages
(then the next three turns of that conversation, resending each reply it got); meanwhile another
client of the same ctxproxy sends small one-message requests to other conversations, one every
50 ms, and records their latencies. The fake upstream and ctxproxy (128k window, `local/extractive`)
are separate processes on loopback. What the issue's targets look at: the import's latency and the
slowest next turn's, and the other client's p99 and worst wait while the import is in flight.

    python -m bench.import_stall [--sizes 5000,20000,50000] [--continuing N]
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

from bench.common import HEADERS, MODEL, Server, pct, session, start_ctxproxy, start_upstream

WINDOW = 128_000
OTHER_EVERY_S = 0.05
NEXT_TURNS = ("why?", "and the one after it?", "what should we retry first?")


@dataclass(frozen=True)
class Plan:
    sizes: tuple[int, ...] = (5_000, 20_000, 50_000)
    # 0: the other client's requests each start a conversation (routed to the least busy engine);
    # N: they continue N conversations started before the import (already placed on an engine,
    # perhaps the importer's: what a server's existing users see).
    continuing: int = 0


def imported(n: int) -> list[dict[str, Any]]:
    """A deterministic history of about `n` messages: job questions and answers with identifiers."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an operations assistant."}]
    for i in range(n // 2):
        messages.append({"role": "user", "content": f"question {i}: what is the status of job J-{i:05d} on "
                                                    f"host h{i % 37}? " + "details " * 20})
        messages.append({"role": "assistant", "content": f"job J-{i:05d} finished with code {i % 5} after "
                                                         f"{i % 97} s " + "log " * 20})
    messages.append({"role": "user", "content": "summarise what failed"})
    return messages


async def _post(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[float, str]:
    """Seconds of one call (which must succeed), and the reply's text."""
    began = time.perf_counter()
    async with http.post(url, json=body, headers=HEADERS) as resp:
        raw = await resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{url}: {resp.status} {raw[:300]!r}")
    return time.perf_counter() - began, json.loads(raw)["choices"][0]["message"]["content"]


async def one_size(http: aiohttp.ClientSession, proxy: Server, n: int, continuing: int = 0) -> dict[str, Any]:
    """Import `n` messages, then three more turns, while the other client keeps sending (new
    conversations, or `continuing` ones started first)."""
    other_ms: list[float] = []
    done = asyncio.Event()
    started = [await _started(http, proxy, f"conversation {c} of the other client ({n})")
               for c in range(continuing)]

    async def other() -> None:
        k = 0
        while not done.is_set():
            history = started[k % len(started)] if started else []
            history.append({"role": "user", "content": f"ping {n}-{k}"})
            seconds, said = await _post(http, proxy.chat_url, {"model": MODEL, "messages": history})
            history.append({"role": "assistant", "content": said})
            other_ms.append(seconds * 1000)
            k += 1
            await asyncio.sleep(OTHER_EVERY_S)

    running = asyncio.create_task(other())
    messages = imported(n)
    try:
        import_s, reply = await _post(http, proxy.chat_url, {"model": MODEL, "messages": messages})
        next_s: list[float] = []
        for question in NEXT_TURNS:  # the client resends the reply it got, as agents do
            messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": question}]
            seconds, reply = await _post(http, proxy.chat_url, {"model": MODEL, "messages": messages})
            next_s.append(seconds)
    finally:
        done.set()
        await running
    return {"messages": n, "import_s": round(import_s, 2), "next_turn_s": round(max(next_s), 2),
            "other_requests": len(other_ms), "other_p50_ms": round(pct(other_ms, 50), 1),
            "other_p99_ms": round(pct(other_ms, 99), 1), "other_max_ms": round(max(other_ms, default=0), 1)}


async def _started(http: aiohttp.ClientSession, proxy: Server, opening: str) -> list[dict[str, Any]]:
    """A conversation's first turn: its history so far."""
    history = [{"role": "user", "content": opening}]
    history.append({"role": "assistant", "content": (await _post(http, proxy.chat_url,
                                                                {"model": MODEL, "messages": history}))[1]})
    return history


async def run(plan: Plan) -> dict[str, Any]:
    """One ctxproxy per size (a fresh store), the same fake upstream."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="ctximport-") as tmp:
        work = Path(tmp)
        upstream = start_upstream(work)
        try:
            for n in plan.sizes:
                proxy = start_ctxproxy(work, upstream.url, window=WINDOW, extractive=True,
                                       name=f"ctx-import-{n}")
                try:
                    async with session(8) as http:
                        rows.append(await one_size(http, proxy, n, plan.continuing))
                finally:
                    proxy.stop()
        finally:
            upstream.stop()
    return {"window": WINDOW, "continuing": plan.continuing, "rows": rows}


def table(result: dict[str, Any]) -> str:
    others = (f"continuing {result['continuing']} conversations started before the import"
              if result.get("continuing") else "each one a new conversation")
    lines = [f"an imported history beside another client (window {result['window'] // 1000}k, "
             f"local/extractive; the other client sends a small request every {OTHER_EVERY_S * 1000:g} ms, "
             f"{others})",
             f"{'messages':>9}{'import s':>10}{'next turn s':>13}{'other n':>9}{'other p50 ms':>14}"
             f"{'other p99 ms':>14}{'other max ms':>14}"]
    for r in result["rows"]:
        lines.append(f"{r['messages']:>9}{r['import_s']:>10.2f}{r['next_turn_s']:>13.2f}{r['other_requests']:>9}"
                     f"{r['other_p50_ms']:>14.1f}{r['other_p99_ms']:>14.1f}{r['other_max_ms']:>14.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default=",".join(str(s) for s in Plan.sizes))
    parser.add_argument("--continuing", type=int, default=0, metavar="N",
                        help="the other client continues N conversations started before the import")
    args = parser.parse_args(argv)
    plan = Plan(tuple(int(s) for s in args.sizes.split(",")), args.continuing)
    print(table(asyncio.run(run(plan))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
