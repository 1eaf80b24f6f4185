"""SQLite's memory settings side by side: search latency with and without the memory map.

One store of 100k messages (bench/search_bench.py's corpus), one connection per setting, every query
run on each connection in turn (order rotated per query), so load on a shared machine hits every
setting alike. Settings (`store.cache_mib`/`store.mmap_mib`): the old default (2 MiB page cache,
256 MiB map), the default now (the same page cache, no map), and a larger page cache without a map.

    python -m bench.store_pragmas [--messages N] [--queries N]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

from bench.common import pct
from bench.search_bench import fill, queries
from config.settings import StoreSettings
from store.models import SearchQuery
from store.sqlite.store import Store

SETTINGS = {"cache 2 MiB + mmap 256 MiB (before)": (2, 256), "cache 2 MiB, no mmap (default)": (2, 0),
            "cache 8 MiB, no mmap": (8, 0)}


def run(messages: int = 100_000, n_queries: int = 300, rounds: int = 3) -> dict[str, list[float]]:
    """Milliseconds per search, by setting, over `rounds` passes of the query mix."""
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "bench.db")
        store = Store.open(StoreSettings(path=path))
        tenants = [store.tenant_id_for_key("sk-bench-a"), store.tenant_id_for_key("sk-bench-b")]
        convs = fill(store, tenants, messages, 10)
        store.close()
        stores = {name: Store.open(StoreSettings(path=path, cache_mib=c, mmap_mib=m))
                  for name, (c, m) in SETTINGS.items()}
        try:
            qs = queries(random.Random(11), convs[tenants[0]], n_queries)
            return _measure(stores, tenants[0], qs, rounds)
        finally:
            for store in stores.values():
                store.close()


def _measure(stores: dict[str, Store], tenant: str, qs: list[SearchQuery],
             rounds: int) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {name: [] for name in stores}
    names = list(stores)
    for name in names:  # warm each connection (and the kernel's page cache) alike
        for q in qs[:20]:
            stores[name].for_tenant(tenant).search(q)
    for r in range(rounds):
        for i, q in enumerate(qs):
            shift = (i + r) % len(names)
            for name in names[shift:] + names[:shift]:
                began = time.perf_counter()
                stores[name].for_tenant(tenant).search(q)
                timings[name].append((time.perf_counter() - began) * 1000)
    return timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    timings = run(args.messages, args.queries, args.rounds)
    base = pct(timings[next(iter(SETTINGS))], 50)
    for name, ms in timings.items():
        print(f"{name:<38} search p50 {pct(ms, 50):6.2f} ms  p99 {pct(ms, 99):6.2f} ms  "
              f"p50 vs before {pct(ms, 50) / base if base else 0:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
