"""Search on PostgreSQL: bench/search_bench.py's corpus and query mix, through PgTenantConnection.search.

Fills a throw-away database (dropped afterwards) with synthetic messages in one transaction (the
trigger computes every tsvector, the GIN and pg_trgm indexes are maintained as rows arrive), then
times the same 300 mixed searches as the SQLite bench. Skipped when no PostgreSQL server answers.

    python -m bench.search_pg [--messages N] [--queries N]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench import search_bench
from config.settings import StoreSettings
from store.models import SearchQuery
from store.postgres.store import PgStore


def fill(store: PgStore, tenants: list[str], total: int, per_tenant: int) -> dict[str, list[str]]:
    """Write `total` messages over tenants and conversations; return conversation ids per tenant."""
    rng = random.Random(7)
    now = time.time()
    convs = {t: [f"conv_bench_{t[:6]}_{i}" for i in range(per_tenant)] for t in tenants}
    pairs = [(t, c) for t in tenants for c in convs[t]]
    per_conv = total // len(pairs)
    rows: list[tuple[Any, ...]] = []
    for tenant, cid in pairs:
        for seq in range(per_conv):
            role = "user" if seq % 2 == 0 else "assistant"
            text = search_bench._text(rng)
            rows.append((tenant, cid, seq, role, json.dumps({"role": role, "content": text}), text,
                         len(text) // 4, f"{cid}-{seq}", f"h{seq}",
                         now - 90 * search_bench.DAY * (1 - seq / per_conv)))
    with store.db.lock, store.db.conn.transaction(), store.db.conn.cursor() as cur:
        cur.executemany("INSERT INTO conversations (id, tenant_id, model, message_count, created_at, "
                        "updated_at) VALUES (%s, %s, 'bench', %s, %s, %s)",
                        [(c, t, per_conv, now, now) for t, c in pairs])
        cur.executemany("INSERT INTO messages (tenant_id, conversation_id, seq, role, message_json, text, "
                        "token_count, chain_hash, content_hash, created_at) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", rows)
    store.db.execute("ANALYZE")
    return convs


_FORMS: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("substring", lambda p: p.startswith("%") and p.endswith("%")),
    ("phrase", lambda p: p.startswith('"')),
    ("and", lambda p: " AND " in p), ("or", lambda p: " OR " in p), ("not", lambda p: " NOT " in p),
    ("cjk", lambda p: any(ord(ch) > 0x2E80 for ch in p)),
    ("prefix", lambda p: p.endswith("%")),
    ("identifier", lambda p: "_" in p or "." in p),
    ("word", lambda p: True),
)


def form(pattern: str) -> str:
    """Which of search_bench's pattern forms a pattern is (figures per form explain the p99)."""
    return next(name for name, test in _FORMS if test(pattern))


def by_form(qs: list[SearchQuery], timings: list[float]) -> dict[str, dict[str, float]]:
    """p50 and p99 (ms) of each pattern form, timings in query order."""
    groups: dict[str, list[float]] = {}
    for q, ms in zip(qs, timings, strict=True):
        groups.setdefault(form(q.pattern), []).append(ms)
    return {name: {"n": len(t), "p50_ms": statistics.median(t), "p99_ms": _p99(sorted(t))}
            for name, t in groups.items()}


def _p99(ordered: list[float]) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def run(messages: int, n_queries: int, conversations: int = 10) -> dict[str, Any] | None:
    from tests.pg import server as pg

    if not pg.server_answers():
        return None
    url = pg.create_database()
    try:
        store = PgStore.open(StoreSettings(url=url))
        tenants = [store.tenant_id_for_key("sk-bench-a"), store.tenant_id_for_key("sk-bench-b")]
        began = time.perf_counter()
        convs = fill(store, tenants, messages, conversations)
        fill_s = time.perf_counter() - began
        tenant = store.for_tenant(tenants[0])
        qs = search_bench.queries(random.Random(11), convs[tenants[0]], n_queries)
        search_bench.measure(tenant, qs[:20])  # warm the buffer cache
        timings, hits = search_bench.measure(tenant, qs)
        store.close()
    finally:
        pg.drop_database(url)
    forms = by_form(qs, timings)
    timings.sort()
    return {"messages": messages, "queries": len(qs), "hits": hits, "fill_s": fill_s,
            "p50_ms": statistics.median(timings), "p99_ms": _p99(timings), "max_ms": timings[-1],
            "by_form": forms}


def report(r: dict[str, Any] | None) -> str:
    if r is None or r.get("skipped"):
        return "search on PostgreSQL: skipped, no PostgreSQL server answers"
    forms = ", ".join(f"{name} {f['p50_ms']:.1f}/{f['p99_ms']:.1f}"
                      for name, f in sorted(r.get("by_form", {}).items()))
    return (f"search on PostgreSQL: {r['messages']} messages filled in {r['fill_s']:.1f} s; {r['queries']} "
            f"queries, {r['hits']} hits; p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, "
            f"max {r['max_ms']:.2f} ms\n  per pattern form, p50/p99 ms: {forms}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args(argv)
    print(report(run(args.messages, args.queries)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
