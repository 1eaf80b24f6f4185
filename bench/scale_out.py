"""Scaling out: requests per second at concurrency 32, side by side with the upstream called directly.

Targets, each its own processes on loopback against one fake upstream process: the upstream direct;
ctxproxy with 1 and with 2 workers (`serve --workers 2`) on SQLite; 1 ctxproxy process on PostgreSQL
(the backend's own cost against SQLite's) and 2 replicas sharing one PostgreSQL database (the load
alternates between them); each on a fresh database, skipped when no PostgreSQL server answers.
Figures are printed as measured, plus each rate as a ratio of the direct one and of 1 worker, and
the CPU per request of the target's processes (master, workers, replicas; from /proc): the issue's
test of scaling where the load generator shares the cores is CPU per request unchanged with 2.

    python -m bench.scale_out [--n N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common import (
    MODEL,
    Server,
    ctxproxy_config,
    fmt_ratio,
    free_port,
    pct,
    poster,
    ratio,
    run_load,
    session,
    spawn,
    start_upstream,
    tree_cpu_seconds,
)

SMALL = {"model": MODEL, "messages": [{"role": "user", "content": "ping"}]}
CONCURRENCY = 32


def start_proxy(workdir: Path, name: str, upstream_url: str, *, workers: int = 1,
                store_url: str | None = None) -> Server:
    """`ctxproxy serve` (a master with `workers` workers when > 1) on its own port."""
    cfg = workdir / f"{name}.yaml"
    cfg.write_text(ctxproxy_config(upstream_url, workdir / f"{name}.db", 1_000_000).replace(
        "  log_level: info", "  log_level: warning"))
    port = free_port()
    argv = [sys.executable, "-m", "proxy", "serve", "--config", str(cfg), "--port", str(port),
            "--workers", str(workers)]
    env = {"CTXPROXY_STORE__URL": store_url} if store_url else None
    return spawn(name, argv, port, "/readyz", workdir / f"{name}.log", env=env, timeout_s=180)


def _body(conversation: int) -> bytes:
    return json.dumps({**SMALL, "messages": [{"role": "user", "content": f"ping {conversation}"}]}).encode()


async def measure(urls: list[str], n: int, pids: Sequence[int] = ()) -> dict[str, float]:
    """rps and latency at concurrency 32, client w on `urls[w % len(urls)]` (replicas alternate):
    every client on one conversation (a hot spot: its writes serialise), then each on its own; and
    the CPU per request of the processes `pids` (with their workers), when there are any."""
    out: dict[str, float] = {}
    async with session(CONCURRENCY * 2) as http:
        for mode, conversations in (("one", 1), ("many", CONCURRENCY)):
            calls = [poster(http, urls[w % len(urls)], _body(w % conversations)) for w in range(CONCURRENCY)]
            await run_load(calls, 64, CONCURRENCY)  # warm-up: connections, caches, first turns stored
            began = sum(map(tree_cpu_seconds, pids))
            load = await run_load(calls, n, CONCURRENCY)
            cpu = (sum(map(tree_cpu_seconds, pids)) - began) * 1000 / n
            out |= {f"rps_{mode}": load.rps, f"p50_{mode}_ms": pct(load.latencies_ms, 50),
                    f"p99_{mode}_ms": pct(load.latencies_ms, 99)} | ({f"cpu_{mode}_ms": cpu} if pids else {})
    return out


@contextmanager
def pg_database() -> Iterator[str | None]:
    """A throw-away PostgreSQL database (dropped afterwards), or None when no server answers."""
    from tests.pg import server as pg

    if not pg.server_answers():
        yield None
        return
    url = pg.create_database()
    try:
        yield url
    finally:
        pg.drop_database(url)


async def _measure_started(servers: list[Server], n: int) -> dict[str, float]:
    try:
        return await measure([s.chat_url for s in servers], n, [s.proc.pid for s in servers])
    finally:
        for s in servers:
            s.stop(30)


async def run(n: int) -> dict[str, dict[str, float] | None]:
    """Every target in turn (one at a time: they would share the cores otherwise)."""
    figures: dict[str, dict[str, float] | None] = {}
    with tempfile.TemporaryDirectory(prefix="ctxscale-") as tmp:
        work = Path(tmp)
        upstream = start_upstream(work)
        try:
            figures["direct"] = await measure([upstream.chat_url], n)
            figures["sqlite 1 worker"] = await _measure_started(
                [start_proxy(work, "one", upstream.url)], n)
            figures["sqlite 2 workers"] = await _measure_started(
                [start_proxy(work, "two", upstream.url, workers=2)], n)
            for replicas in (1, 2):
                figures[f"postgres {replicas} replica{'s' if replicas > 1 else ''}"] = await _on_postgres(
                    work, upstream.url, replicas, n)
        finally:
            upstream.stop()
    return figures


async def _on_postgres(work: Path, upstream_url: str, replicas: int, n: int) -> dict[str, float] | None:
    """`replicas` ctxproxy processes sharing a fresh PostgreSQL database (None: no server answers)."""
    with pg_database() as pg_url:
        if pg_url is None:
            return None
        return await _measure_started([start_proxy(work, f"pg{replicas}-{i}", upstream_url, store_url=pg_url)
                                       for i in range(replicas)], n)


def table(figures: Mapping[str, Mapping[str, float] | None], n: int) -> str:
    direct, one = figures["direct"], figures["sqlite 1 worker"]
    assert direct is not None and one is not None
    lines = [f"scaling out: {n} small requests at concurrency {CONCURRENCY} (fake upstream process); "
             f"'one': every client on one conversation, 'many': {CONCURRENCY} conversations",
             f"{'target':<22}{'mode':>5}{'rps':>8}{'p50 ms':>9}{'p99 ms':>9}{'of direct':>11}"
             f"{'of 1 worker':>13}{'CPU ms/req':>12}{'CPU of 1 worker':>17}"]
    for name, f in figures.items():
        if f is None:
            lines.append(f"{name:<22}  skipped: no PostgreSQL server answers")
            continue
        for mode in ("one", "many"):
            rps = f[f"rps_{mode}"]
            lines.append(f"{name:<22}{mode:>5}{rps:>8.0f}{f[f'p50_{mode}_ms']:>9.2f}{f[f'p99_{mode}_ms']:>9.2f}"
                         f"{fmt_ratio(ratio(rps, direct[f'rps_{mode}'])):>11}"
                         f"{fmt_ratio(ratio(rps, one[f'rps_{mode}'])):>13}{_cpu(f, mode):>12}"
                         f"{fmt_ratio(cpu_ratio(f, one, mode)):>17}")
    return "\n".join(lines)


def _cpu(figures: Mapping[str, float], mode: str) -> str:
    cpu = figures.get(f"cpu_{mode}_ms")
    return "-" if cpu is None else f"{cpu:.2f}"


def cpu_ratio(figures: Mapping[str, float], one: Mapping[str, float], mode: str) -> float | None:
    """A target's CPU per request over one worker's, in `mode` (None where either was not measured)."""
    cpu, base = figures.get(f"cpu_{mode}_ms"), one.get(f"cpu_{mode}_ms")
    return None if cpu is None or base is None else ratio(cpu, base)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2_000, help="measured requests per target")
    args = parser.parse_args(argv)
    figures: dict[str, Any] = asyncio.run(run(args.n))
    print(table(figures, args.n))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
