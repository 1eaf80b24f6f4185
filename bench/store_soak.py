"""The store over a sustained soak: WAL size, bytes per stored message, bytes per forwarded request.

The real server (`ctxproxy serve`, a subprocess) takes `requests` chat turns from `concurrency`
workers over `conversations` conversations growing turn by turn (every request resends its history,
the previous reply and a new user message); the WAL file's size is sampled every `sample_s`. After a
graceful stop the store file is measured: bytes per stored message, the forwarded log's share, and
(separately, in-process) the forwarded log's bytes per request on a 50- and a 500-message history.

    python -m bench.store_soak [--requests N (default 3000, up to 20000)] [--conversations N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench.common import HEADERS, MODEL, Server, session, start_ctxproxy, start_upstream
from compaction import Message

MIB = 1024 * 1024
FORWARDED_LENGTHS = (50, 500)


@dataclass(frozen=True)
class Plan:
    requests: int = 3_000
    conversations: int = 100
    concurrency: int = 16
    sample_s: float = 0.2
    max_s: float = 1_800.0


def user_text(i: int, turn: int) -> str:
    """A user message of a few hundred bytes, different every turn."""
    return (f"conversation {i}, turn {turn}: please look at build {i * 7919 + turn} again; the log "
            f"says the step failed after {turn * 13 % 97} seconds with exit code {turn % 5}, and the "
            "retry policy in deploy/pipeline.yaml still waits ten minutes before the second attempt.")


async def _turn(http: aiohttp.ClientSession, proxy: Server, history: list[Message], i: int) -> None:
    history.append({"role": "user", "content": user_text(i, len(history) // 2)})
    body = json.dumps({"model": MODEL, "messages": history}).encode()
    async with http.post(proxy.chat_url, data=body, headers=HEADERS) as resp:
        if resp.status != 200:
            raise RuntimeError(f"{resp.status}: {(await resp.text())[:300]}")
        answer = await resp.json()
    history.append({"role": "assistant", "content": answer["choices"][0]["message"].get("content") or ""})


async def drive(proxy: Server, plan: Plan) -> None:
    """`plan.requests` turns; worker w owns conversations w, w + concurrency, ... (turns in order)."""
    histories = [[{"role": "system", "content": f"Soak conversation {i}."}]
                 for i in range(plan.conversations)]
    counter = [0]

    async def worker(w: int, http: aiohttp.ClientSession) -> None:
        mine = list(range(w, plan.conversations, plan.concurrency)) or [w % plan.conversations]
        k = 0
        while counter[0] < plan.requests:
            counter[0] += 1
            await _turn(http, proxy, histories[mine[k % len(mine)]], mine[k % len(mine)])
            k += 1

    async with session(plan.concurrency * 2) as http:
        await asyncio.gather(*(worker(w, http) for w in range(min(plan.concurrency, plan.conversations))))


async def sample_wal(wal: Path, every_s: float, samples: list[int]) -> None:
    """Append the WAL file's size every `every_s` until cancelled."""
    while True:
        samples.append(wal.stat().st_size if wal.exists() else 0)
        await asyncio.sleep(every_s)


def store_figures(db: Path) -> dict[str, Any]:
    """Sizes read from the stopped server's store file."""
    conn = sqlite3.connect(db)
    try:
        messages = conn.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(message_json)), 0) "
                                "FROM messages").fetchone()
        forwarded_rows = conn.execute("SELECT COUNT(*) FROM forwarded").fetchone()[0]
        pages = dict(conn.execute("SELECT CASE WHEN name LIKE 'forwarded%' THEN 'forwarded' "
                                  "ELSE 'other' END, SUM(pgsize) FROM dbstat GROUP BY 1").fetchall())
    finally:
        conn.close()
    size = db.stat().st_size
    forwarded = int(pages.get("forwarded", 0))
    return {"db_bytes": size, "messages": messages[0], "message_json_bytes": messages[1],
            "bytes_per_message": size / messages[0] if messages[0] else 0.0,
            "forwarded_rows": forwarded_rows, "forwarded_bytes": forwarded,
            "forwarded_share": forwarded / size if size else 0.0,
            "forwarded_bytes_per_request": forwarded / forwarded_rows if forwarded_rows else 0.0}


async def run(plan: Plan) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ctxsoak-") as tmp:
        upstream = start_upstream(Path(tmp))
        proxy = start_ctxproxy(Path(tmp), upstream.url)
        samples: list[int] = []
        sampler = asyncio.create_task(sample_wal(Path(tmp) / "ctxproxy.db-wal", plan.sample_s, samples))
        began = time.perf_counter()
        try:
            await asyncio.wait_for(drive(proxy, plan), plan.max_s)
        finally:
            seconds = time.perf_counter() - began
            sampler.cancel()
            proxy.stop(60.0)
            upstream.stop()
        figures = store_figures(Path(tmp) / "ctxproxy.db")
    return {"requests": plan.requests, "conversations": plan.conversations, "concurrency": plan.concurrency,
            "seconds": seconds, "rps": plan.requests / seconds if seconds else 0.0,
            "wal_max_bytes": max(samples, default=0), "wal_samples": len(samples), **figures,
            "forwarded_per_request_by_length": {str(n): forwarded_bytes_per_request(n)
                                                for n in FORWARDED_LENGTHS}}


def forwarded_bytes_per_request(length: int, requests: int = 40) -> float:
    """Payload bytes (dbstat) the forwarded log gains per request on a `length`-message conversation,
    measured in-process on a fresh store (the conversation's first request, which creates its
    state, excluded)."""
    from config.settings import StoreSettings
    from store.models import ForwardedRecord
    from store.sqlite.store import Store

    def hashes(n: int) -> tuple[str, ...]:
        return tuple(f"{i:064x}" for i in range(n))  # engine hashes are 64 hex characters

    with tempfile.TemporaryDirectory(prefix="ctxfwd-") as tmp:
        store = Store.open(StoreSettings(path=os.path.join(tmp, "f.db")))
        try:
            tenant = store.for_tenant("t")
            msgs = [{"role": "user", "content": f"m{i}"} for i in range(length)]
            cid = tenant.ingest(msgs, model="m", external_id=None, count_tokens=lambda m: 5).conversation.id

            def payload() -> int:
                return int(store.conn.execute("SELECT COALESCE(SUM(pgsize - unused), 0) FROM dbstat "
                                              "WHERE name LIKE 'forwarded%'").fetchone()[0])

            tenant.record_forwarded(ForwardedRecord(cid, hashes(length), 1, 1, 1, {"system": 1}, False, 0))
            before = payload()
            for j in range(requests):
                tenant.record_forwarded(ForwardedRecord(cid, hashes(length + j), 1, 1, 1, {"system": 1},
                                                        False, 0))
            return (payload() - before) / requests
        finally:
            store.close()


def table(r: dict[str, Any]) -> str:
    by_length = r["forwarded_per_request_by_length"]
    return "\n".join([
        f"store soak: {r['requests']} requests over {r['conversations']} conversations "
        f"(concurrency {r['concurrency']}), {r['seconds']:.1f} s, {r['rps']:.0f} req/s",
        f"WAL max {r['wal_max_bytes'] / MIB:.2f} MiB over {r['wal_samples']} samples; "
        f"database {r['db_bytes'] / MIB:.2f} MiB after a graceful stop",
        f"{r['messages']} stored messages: {r['bytes_per_message']:.0f} bytes per stored message "
        f"(message JSON itself {r['message_json_bytes'] / max(1, r['messages']):.0f} bytes)",
        f"forwarded log: {r['forwarded_share']:.1%} of the database, "
        f"{r['forwarded_bytes_per_request']:.0f} bytes per forwarded request (pages / rows)",
        "forwarded bytes per request by history length: "
        + ", ".join(f"{n} messages {v:.0f} B" for n, v in by_length.items())])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=Plan.requests)
    parser.add_argument("--conversations", type=int, default=Plan.conversations)
    parser.add_argument("--concurrency", type=int, default=Plan.concurrency)
    args = parser.parse_args(argv)
    plan = Plan(requests=args.requests, conversations=args.conversations, concurrency=args.concurrency)
    print(table(asyncio.run(run(plan))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
