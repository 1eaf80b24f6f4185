"""Smoke test of `make bench`: every benchmark runs end to end with tiny counts (real subprocesses on
loopback), prints its tables, and the results doc keeps the eval section. Nothing here is timed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import (
    bench_doc,
    cpu_scaling,
    import_stall,
    litellm_proxy,
    memory,
    resend,
    route_cpu,
    run_all,
    store_soak,
    throughput,
)
from bench import memory as memory_bench
from bench.common import cpu_seconds, history, mapped_mb, pct, process_tree, rss_mb, rss_split, tree_rss_mb
from bench.memory import FILLED

pytestmark = pytest.mark.integration  # the benches start servers as subprocesses

TINY: dict[str, Any] = {
    "throughput": throughput.Counts(n=5, n32=12, ttfb=3, warmup=1),
    "resend": resend.Plan(n=4, warmup=1, tokens=3_000),
    "cpu": cpu_scaling.Plan(sizes=(600, 3_000), min_requests=2, max_requests=2, min_cpu_s=0.0, warmup=1,
                            settle_s=0.0),
    "memory": memory.Plan(requests=40, warmup=8, conversations=10, concurrency=4, sample_every=10,
                          max_s=120, fill_max=8, fill_step=4),
    "search": (400, 6, 2),
    "store": store_soak.Plan(requests=40, conversations=8, concurrency=4),
    "scale_out": 40,
    "search_pg": (400, 6),
    "import_stall": import_stall.Plan((300,), continuing=2),
    "routes": route_cpu.Plan(tokens=3_000, requests=3, warmup=1),
}


@pytest.fixture(scope="module")
def tiny_run() -> dict[str, Any]:
    return run_all.run(with_litellm=False, plan=TINY)


def test_every_table_is_printed(tiny_run: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    for render, key in ((throughput.table, "throughput"), (resend.table, "resend"),
                        (cpu_scaling.table, "cpu"), (memory.table, "memory")):
        print(render(tiny_run[key]))
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any(line.startswith("direct") for line in lines)
    assert any(line.startswith("ctxproxy") for line in lines)
    assert "litellm proxy: skipped (run make bench-deps)" in out
    assert "added by ctxproxy: p50" in out
    assert "resent 3k-token history (agent loop, 4 requests each" in out
    assert "[passthrough]" in out and "[compacting-32k]" in out
    assert sum(line.split()[0] in ("600", "3000") for line in lines if line.strip()) == 4
    assert out.count("linear fit: cpu ms/req =") == 2
    assert "MiB per 1k requests" in out and "rss every 10 requests (MiB):" in out
    assert "anon every 10 requests (MiB):" in out and "store mmap:" in out and "plateau (first half" in out
    assert "caches after warm-up (NOT full): " in out and "chain_hashes " in out


def test_result_shape_and_summary(tiny_run: dict[str, Any]) -> None:
    t = tiny_run["throughput"]
    assert t["litellm_skipped"] and t["ctxproxy_vs_litellm_added_p50"] is None
    assert t["targets"]["direct"]["rps_c32"] > 0 and t["targets"]["ctxproxy"]["rps_c1"] > 0
    assert t["targets"]["floor"]["rps_c1"] > 0 and "floor" in t["added"]
    assert all(f["cpu_ms"] >= 0 for f in t["targets"].values() if f)
    for points in tiny_run["cpu"]["series"].values():
        assert [p["tokens"] for p in points] == [600, 3_000]
        first = points[0]  # 2 requests may spend under one 10 ms /proc tick: ratio 0 then, not 1
        assert first["ratio_to_first"] == (1.0 if first["cpu_ms"] else 0.0)
        assert all(p["requests"] == 2 and "marginal_us_per_1k" in p for p in points)
    memory = tiny_run["memory"]
    assert [s["requests"] for s in memory["samples"]] == [10, 20, 30, 40]
    assert all(s["anon"] > 0 and s["file"] > 0 and s["rss"] >= s["anon"] for s in memory["samples"])
    assert 0 <= memory["after"]["db_mapped"] <= memory["after"]["file"] and memory["after"]["db_file"] > 0
    assert memory["unmapped_growth_mb"] == pytest.approx(memory["growth_mb"] - memory["db_mapped_growth_mb"])
    assert memory["warmup"] == 16 and not memory["caches_full"]  # tiny: the fill stops at fill_max
    assert set(memory["caches_warm"]) >= {*FILLED, "resends", "resent_bodies", "valid_messages",
                                          "anthropic_translations", "responses_translations"}
    after = memory["caches_after"]
    assert all(0 <= held <= bound for held, bound in after.values())
    assert all(after[name][0] > 0 for name in FILLED)  # what chat traffic fills
    assert after["anthropic_translations"][0] == 0  # chat traffic: no translations
    assert (memory["mmap_mib"], memory["after"]["db_mapped"]) == (0, 0)  # no map: nothing of the file in RSS
    assert all(v is not None for v in memory["plateau"].values())  # halves at 20 and 40 requests
    assert memory["peer"] is None and memory_bench.peer_ratio(memory) is None  # with_litellm=False
    assert memory["rss_idle_with_litellm_mb"] > memory["rss_start_mb"] + 100  # litellm's ~180 MiB
    assert memory_bench.peer_text(memory) == "beside LiteLLM's proxy: " + litellm_proxy.SKIPPED
    assert tiny_run["search"]["queries"] == 6 and tiny_run["search"]["messages"] == 400
    assert set(tiny_run["meta"]["seconds"]) == {"proxy overhead", "resent 100k-token history",
                                                "cpu per route", "cpu vs history size", "memory", "search",
                                                "store soak", "scaling out", "imported history",
                                                "search on postgresql"}
    r = tiny_run["resend"]
    assert r["requests"] == 4 and r["tokens"] == 3_000
    assert all(r[target][k] > 0 for target in ("direct", "ctxproxy") for k in ("p50_ms", "p99_ms"))
    assert r["added"]["p50_ms"] == pytest.approx(r["ctxproxy"]["p50_ms"] - r["direct"]["p50_ms"])
    assert r["met"] == (r["added"]["p50_ms"] <= 5.0 and r["added"]["p99_ms"] <= 15.0)
    assert set(tiny_run["scale_out"]) == {"direct", "sqlite 1 worker", "sqlite 2 workers",  # PostgreSQL's
                                          "postgres 1 replica", "postgres 2 replicas"}  # None if absent
    assert all(f["rps_one"] > 0 and f["rps_many"] > 0 for f in tiny_run["scale_out"].values() if f)
    scaled = {name: f for name, f in tiny_run["scale_out"].items() if f and name != "direct"}
    assert all(f["cpu_one_ms"] > 0 and f["cpu_many_ms"] > 0 for f in scaled.values())  # workers counted too
    assert "cpu_many_ms" not in tiny_run["scale_out"]["direct"]
    store = tiny_run["store"]
    assert store["messages"] == 8 + 2 * 40 and store["wal_max_bytes"] > 0 and store["bytes_per_message"] > 0
    assert set(store["forwarded_per_request_by_length"]) == {"50", "500"}
    lines = run_all.summary_lines(tiny_run)
    assert lines[1] == "litellm proxy: skipped (run make bench-deps)"
    assert lines[2].startswith("resent 3k-token history: added p50 ") and "beside the direct call" in lines[2]
    assert sum(line.startswith("cpu [") for line in lines) == 2
    (imported,) = tiny_run["import_stall"]["rows"]
    assert imported["messages"] == 300 and imported["import_s"] > 0 and imported["next_turn_s"] > 0
    assert imported["other_requests"] >= 1 and imported["other_max_ms"] >= imported["other_p50_ms"] > 0
    assert tiny_run["import_stall"]["continuing"] == 2
    assert lines[-1].startswith("imported history: 300 messages: import ")
    routes = tiny_run["routes"]["routes"]
    assert set(routes) == {"chat", "messages", "responses"} and routes["chat"]["vs_chat"] in (0.0, 1.0)
    assert any(line.startswith("cpu per route, resent 3k-token history: chat ") for line in lines)
    json.dumps(tiny_run)  # bench.json must be serialisable


def test_results_doc_replaces_only_the_bench_section(tiny_run: dict[str, Any], tmp_path: Path) -> None:
    doc = tmp_path / "results.md"
    eval_block = "<!-- eval:begin x -->\n## Evaluation\nkept\n<!-- eval:end -->"
    doc.write_text(f"# ctxproxy results\n\n{eval_block}\n")
    chart = tmp_path / "img" / "bench_cpu_scaling.png"
    bench_doc.update(doc, chart, tiny_run)
    bench_doc.update(doc, chart, tiny_run)  # idempotent: one bench section, eval untouched
    text = doc.read_text()
    assert text.count(bench_doc.BEGIN) == 1 and text.count(bench_doc.END) == 1
    assert eval_block in text
    assert "](img/bench_cpu_scaling.png)" in text and "skipped (run `make bench-deps`)" in text
    assert "### Resent 3k-token history (agent loop, loopback)" in text and "**added by ctxproxy: p50" in text
    assert "### An imported history beside another client" in text and "\n| 300 | " in text
    assert "### Scaling out" in text and "\n| sqlite 2 workers | " in text and "\n| direct | " in text
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_helpers() -> None:
    assert pct([3.0, 1.0, 2.0], 50) == 2.0 and pct([], 99) == 0.0
    msgs = history(2_000, "x")
    assert msgs[0]["role"] == "system" and msgs[-1]["role"] == "user"
    msgs.append({"role": "user", "content": "mutating the copy"})
    assert history(2_000, "x")[-1]["content"] != "mutating the copy"
    import os

    assert cpu_seconds(os.getpid()) > 0 and rss_mb(os.getpid()) > 10
    split = rss_split(os.getpid())
    assert split["anon"] > 0 and split["file"] > 0 and split["rss"] == pytest.approx(
        split["anon"] + split["file"] + split["shmem"], abs=0.1)
    assert mapped_mb(os.getpid(), Path(os.__file__)) == 0.0  # a module read, never mapped
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert process_tree(os.getpid())[0] == os.getpid() and child.pid in process_tree(os.getpid())
        assert tree_rss_mb(os.getpid()) > rss_mb(os.getpid())  # the child's RSS counted too
    finally:
        child.kill()
        child.wait()


def test_the_peer_ratio_is_ctxproxys_rss_over_litellms() -> None:
    run = {"rss_after_mb": 300.0, "peer": {"requests": 21_000, "rss_start_mb": 150.0, "rss_after_mb": 250.0,
                                           "trend_mb_per_1k": 0.02, "seconds": 100.0}}
    assert memory_bench.peer_ratio(run) == pytest.approx(1.2)
    assert memory_bench.peer_text(run).endswith("ctxproxy/LiteLLM RSS 1.20x (target <= 1.5x: met)")
    assert "(target <= 1.5x: not met)" in memory_bench.peer_text({**run, "rss_after_mb": 400.0})
    assert "210 req/s" in memory_bench.peer_text(run)
    fit_a, fit_b = cpu_scaling.fit([{"tokens": 1000, "cpu_ms": 3.0}, {"tokens": 11000, "cpu_ms": 5.0}])
    assert fit_a == pytest.approx(2.8) and fit_b == pytest.approx(200.0)
