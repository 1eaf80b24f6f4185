"""`make bench`: every benchmark in one run, their tables, a summary of ratios, JSON and docs.

Runs proxy overhead (direct vs ctxproxy vs LiteLLM proxy), the added latency of a resent 100k-token
history beside the direct call, per-request CPU vs history size, memory over 20k requests (RssAnon
and RssFile apart), search over 100k messages and an imported 5k/20k/50k-message history beside
another client; writes
bench/out/bench.json, the CPU chart under docs/img/ and the bench section of docs/results.md
(between the bench markers; the eval section is left alone).

    python -m bench.run_all [--quick] [--no-docs]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import (
    cpu_scaling,
    import_stall,
    memory,
    resend,
    route_cpu,
    scale_out,
    search_bench,
    search_pg,
    store_soak,
    throughput,
)
from bench.common import REPO, fmt_ratio

OUT = REPO / "bench" / "out" / "bench.json"
DOC = REPO / "docs" / "results.md"
CHART = REPO / "docs" / "img" / "bench_cpu_scaling.png"


def plans(quick: bool) -> dict[str, Any]:
    """Iteration counts: the full run, or a quick one (minutes -> seconds) for trying things out."""
    if not quick:
        return {"throughput": throughput.Counts(), "resend": resend.Plan(), "cpu": cpu_scaling.Plan(),
                "memory": memory.Plan(),
                "search": (100_000, 300), "store": store_soak.Plan(), "scale_out": 2_000,
                "search_pg": (100_000, 300), "import_stall": import_stall.Plan(), "routes": route_cpu.Plan()}
    return {"throughput": throughput.Counts(n=50, n32=200, ttfb=30, warmup=5),
            "resend": resend.Plan(n=50, warmup=5),
            "cpu": cpu_scaling.Plan(sizes=(1_000, 10_000, 50_000), min_requests=3, max_requests=6,
                                    min_cpu_s=0.05, warmup=2),
            "memory": memory.Plan(requests=600, warmup=100, conversations=100, sample_every=200),
            "search": (5_000, 50), "store": store_soak.Plan(requests=500, conversations=25),
            "scale_out": 200, "search_pg": (5_000, 50), "import_stall": import_stall.Plan((2_000, 5_000)),
            "routes": route_cpu.Plan(requests=60)}


def timed_step(name: str, step: Callable[[], dict[str, Any]], render: Callable[[dict[str, Any]], str],
               seconds: dict[str, float]) -> dict[str, Any]:
    """Run one benchmark, print its table, record its wall time."""
    print(f"\n== {name} ==", flush=True)
    began = time.perf_counter()
    result = step()
    seconds[name] = round(time.perf_counter() - began, 1)
    print(render(result), flush=True)
    print(f"({name}: {seconds[name]} s)", flush=True)
    return result


def run(quick: bool = False, with_litellm: bool = True, plan: dict[str, Any] | None = None) -> dict[str, Any]:
    """All benchmarks in turn; the combined result (also what bench.json holds)."""
    p, seconds = plan or plans(quick), dict[str, float]()
    began = time.perf_counter()
    results = {
        "throughput": timed_step("proxy overhead", lambda: asyncio.run(
            throughput.run(p["throughput"], with_litellm)), throughput.table, seconds),
        "resend": timed_step("resent 100k-token history", lambda: asyncio.run(resend.run(p["resend"])),
                             resend.table, seconds),
        "routes": timed_step("cpu per route", lambda: asyncio.run(route_cpu.run(p["routes"])),
                             route_cpu.table, seconds),
        "cpu": timed_step("cpu vs history size", lambda: asyncio.run(cpu_scaling.run(p["cpu"])),
                          cpu_scaling.table, seconds),
        "memory": timed_step("memory", lambda: asyncio.run(memory.run(
            dataclasses.replace(p["memory"], peer=with_litellm))), memory.table, seconds),
        "search": timed_step("search", lambda: search_bench.run(*p["search"]), search_bench.report, seconds),
        "store": timed_step("store soak", lambda: asyncio.run(store_soak.run(p["store"])), store_soak.table,
                            seconds),
        "scale_out": timed_step("scaling out", lambda: asyncio.run(scale_out.run(p["scale_out"])),
                                lambda r: scale_out.table(r, p["scale_out"]), seconds),
        "import_stall": timed_step("imported history",
                                   lambda: asyncio.run(import_stall.run(p["import_stall"])),
                                   import_stall.table, seconds),
        "search_pg": timed_step("search on postgresql",
                                lambda: search_pg.run(*p["search_pg"]) or {"skipped": True},
                                search_pg.report, seconds),
    }
    meta = {"quick": quick, "seconds": seconds, "total_s": round(time.perf_counter() - began, 1),
            "python": platform.python_version(), "cpus": _cpus(), "machine": platform.machine()}
    return {**results, "meta": meta, "summary": summary(results)}


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 0)


def summary(r: dict[str, Any]) -> dict[str, Any]:
    """The headline ratios (what the product owner reads first)."""
    t, mem, s = r["throughput"], r["memory"], r["search"]
    direct, ctx = t["targets"]["direct"], t["targets"]["ctxproxy"]
    out: dict[str, Any] = {
        "ctxproxy_added_p50_ms": t["added"]["ctxproxy"]["p50_ms"],
        "resend_100k_added_p50_ms": r["resend"]["added"]["p50_ms"],
        "resend_100k_added_p99_ms": r["resend"]["added"]["p99_ms"],
        "ctxproxy_vs_litellm_added_p50": t["ctxproxy_vs_litellm_added_p50"],
        "ctxproxy_rps_c32_vs_direct": ctx["rps_c32"] / direct["rps_c32"] if direct["rps_c32"] else None,
        "ctxproxy_cpu_vs_floor": t["ctxproxy_cpu_vs_floor"],
        "memory_trend_mb_per_1k": mem["trend_mb_per_1k"], "memory_met": memory.met(mem),
        "memory_growth_mb_per_1k": mem["growth_mb_per_1k"],
        "memory_anon_growth_mb_per_1k": mem["anon_growth_mb_per_1k"],
        "memory_unmapped_growth_mb_per_1k": mem["unmapped_growth_mb_per_1k"], "search_p99_ms": s["p99_ms"],
        "memory_vs_litellm_rss": memory.peer_ratio(mem),
        "wal_max_mib": r["store"]["wal_max_bytes"] / store_soak.MIB,
        "bytes_per_stored_message": r["store"]["bytes_per_message"]}
    if t["targets"].get("litellm"):
        out["litellm_added_p50_ms"] = t["added"]["litellm"]["p50_ms"]
        llp = t["targets"]["litellm"]
        out["ctxproxy_vs_litellm_rps_c32"] = ctx["rps_c32"] / llp["rps_c32"] if llp["rps_c32"] else None
    for name, points in r["cpu"]["series"].items():
        out[f"cpu_{name}_largest_vs_smallest_per_1k"] = points[-1]["ratio_to_first"]
        out[f"cpu_{name}_fit"] = r["cpu"]["fit"][name]
    return out


def summary_lines(r: dict[str, Any]) -> list[str]:
    s, t = r["summary"], r["throughput"]
    lines = [f"ctxproxy added p50: {s['ctxproxy_added_p50_ms']:.2f} ms; "
             f"rps at c32 {fmt_ratio(s['ctxproxy_rps_c32_vs_direct'])} of direct; CPU per small request "
             f"{fmt_ratio(s['ctxproxy_cpu_vs_floor'])} the floor's"]
    if t["litellm_skipped"]:
        lines.append("litellm proxy: skipped (run make bench-deps)")
    else:
        verdict = "ok" if (s["ctxproxy_vs_litellm_added_p50"] or 0) <= throughput.TARGET_RATIO else "OVER"
        lines.append(f"ctxproxy vs LiteLLM proxy: added p50 {fmt_ratio(s['ctxproxy_vs_litellm_added_p50'])} "
                     f"(target <= {throughput.TARGET_RATIO:g}x: {verdict}), rps at c32 "
                     f"{fmt_ratio(s['ctxproxy_vs_litellm_rps_c32'])}")
    lines.append(_resend_line(r["resend"]))
    for name, f in r["cpu"]["fit"].items():
        lines.append(f"cpu [{name}]: {f['fixed_ms']:.2f} ms + {f['us_per_1k_tokens']:.1f} µs per 1k history "
                     f"tokens; µs/1k at the largest size = "
                     f"{fmt_ratio(s[f'cpu_{name}_largest_vs_smallest_per_1k'])} of the smallest")
    lines.append(f"memory: trend {memory.per_1k(s['memory_trend_mb_per_1k'])} MiB per 1k requests "
                 f"(target <= {memory.TARGET_MB_PER_1K:g}: {'ok' if s['memory_met'] else 'OVER'}); "
                 f"warm-up to end {s['memory_growth_mb_per_1k']:+.3f} "
                 f"(anon {s['memory_anon_growth_mb_per_1k']:+.3f}; "
                 f"all but the store's mmap {s['memory_unmapped_growth_mb_per_1k']:+.3f}); "
                 f"search p99 {s['search_p99_ms']:.2f} ms")
    lines.append("memory " + memory.peer_text(r["memory"]))
    lines.append(f"store: WAL max {s['wal_max_mib']:.1f} MiB; "
                 f"{s['bytes_per_stored_message']:.0f} bytes per stored message")
    return lines + _route_lines(r.get("routes")) + _scale_out_lines(r) + _import_lines(r.get("import_stall"))


def _route_lines(r: dict[str, Any] | None) -> list[str]:
    """CPU per request of a resent history on each route, against chat's."""
    if not r:
        return []
    routes = ", ".join(f"{name} {x['cpu_ms']:.2f} ms ({x['vs_chat']:.2f}x)"
                       for name, x in r["routes"].items())
    return [f"cpu per route, resent {r['tokens'] // 1000}k-token history: {routes}"]


def _resend_line(r: dict[str, Any]) -> str:
    a, t = r["added"], r["targets"]
    return (f"resent {r['tokens'] // 1000}k-token history: added p50 {a['p50_ms']:.2f} ms, p99 "
            f"{a['p99_ms']:.2f} ms beside the direct call (targets <= {t['p50_ms']:g} / <= {t['p99_ms']:g} "
            f"ms: {'met' if r['met'] else 'NOT met'})")


def _scale_out_lines(r: dict[str, Any]) -> list[str]:
    """Requests per second at c32 over 32 conversations, and PostgreSQL search, when they ran."""
    figures, pg = r.get("scale_out"), r.get("search_pg") or {"skipped": True}
    if not figures:
        return []
    rates = ", ".join(f"{name} {f['rps_many']:.0f}" + (f" ({f['cpu_many_ms']:.2f} ms CPU)"
                                                          if "cpu_many_ms" in f else "")
                      for name, f in figures.items() if f)
    lines = [f"scaling out (rps at c32, 32 conversations, CPU per request): {rates}"]
    if not pg.get("skipped"):
        lines.append(f"search on PostgreSQL: p99 {pg['p99_ms']:.2f} ms over {pg['messages']} messages")
    return lines


def _import_lines(r: dict[str, Any] | None) -> list[str]:
    """Per imported size: the import, the next turn and the other client's worst wait."""
    if not r:
        return []
    return ["imported history: " + "; ".join(
        f"{x['messages']} messages: import {x['import_s']:.1f} s, next turn {x['next_turn_s']:.1f} s, other "
        f"client p99 {x['other_p99_ms']:.0f} ms (max {x['other_max_ms']:.0f})" for x in r["rows"])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small iteration counts (seconds)")
    parser.add_argument("--no-litellm", action="store_true", help="skip LiteLLM's proxy")
    parser.add_argument("--no-docs", action="store_true", help="do not touch docs/ (JSON only)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    result = run(args.quick, not args.no_litellm)
    print("\n== summary ==\n" + "\n".join(summary_lines(result)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    if not args.no_docs:
        from bench.bench_doc import update

        update(DOC, CHART, result)
        print(f"wrote {args.out.relative_to(REPO) if args.out.is_relative_to(REPO) else args.out}, "
              f"{DOC.relative_to(REPO)}, {CHART.relative_to(REPO)}")
    print(f"total: {result['meta']['total_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
