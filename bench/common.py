"""Shared benchmark plumbing: percentiles, synthetic histories, loopback servers and load loops.

Servers run as separate processes (the fake upstream, `ctxproxy serve`, LiteLLM's proxy) so no
two of them share an event loop and each one's CPU and RSS can be read from /proc.

    python -m bench.common upstream --port P   # the fake OpenAI upstream used by the benchmarks
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compaction import Message

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import aiohttp  # noqa: E402

MODEL = "gpt-4o-mini"
CLAUDE_MODEL = "claude-sonnet-4-5"  # served by the fake upstream's Messages API (route_cpu)
API_KEY = "sk-bench-0123456789abcdef"
HEADERS = {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"}
REPO = Path(__file__).resolve().parent.parent
WORDS = ("alpha beta gamma delta order invoice deploy kernel socket parser budget anchor summary "  # noqa: SIM905
         "ticket 4411 Lisboa Porto latency window compaction provider stream cache tenant").split()
Call = Callable[[], Awaitable[None]]


def pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def ratio(a: float, b: float) -> float | None:
    """a / b, or None when b is zero (printed as n/a)."""
    return a / b if b else None


def fmt_ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def history(target_tokens: int, tag: str = "") -> list[Message]:
    """A deterministic conversation of about `target_tokens` tokens (counted with the real tokenizer).

    `tag` goes into the system prompt so several histories of one size are distinct conversations.
    Returns a fresh list of fresh dicts (callers append to it).
    """
    return [dict(m) for m in _history(target_tokens, tag)]


@functools.lru_cache(maxsize=16)
def _history(target_tokens: int, tag: str) -> tuple[Message, ...]:
    from compaction import TokenCounter

    counter = TokenCounter.for_model(MODEL)
    messages: list[Message] = [{"role": "system", "content": f"You are a build assistant.{tag}"}]
    total, i = counter.count_message(messages[0]), 0
    while total < target_tokens:
        words = min(150, max(8, (target_tokens - total) // 2))
        text = " ".join(WORDS[(i * 7 + k) % len(WORDS)] + str(k % 13) for k in range(words))
        message = {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: {text}"}
        messages.append(message)
        total += counter.count_message(message)
        i += 1
    if messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": "continue"})
    return tuple(messages)


# ---- HTTP calls ---------------------------------------------------------------------------------

def poster(http: aiohttp.ClientSession, url: str, body: bytes, ttfb: bool = False) -> Call:
    """A call posting `body`; with `ttfb` it returns after the first streamed bytes."""

    async def call() -> None:
        async with http.post(url, data=body, headers=HEADERS) as resp:
            if resp.status != 200:
                raise RuntimeError(f"{url}: {resp.status} {(await resp.text())[:300]}")
            if ttfb:
                await resp.content.readany()
                return  # leaving the block closes the connection; the rest is not timed
            await resp.read()

    return call


async def post_json(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST a chat request and return the decoded JSON answer (raises on a non-200)."""
    async with http.post(url, data=json.dumps(body).encode(), headers=HEADERS) as resp:
        if resp.status != 200:
            raise RuntimeError(f"{url}: {resp.status} {(await resp.text())[:300]}")
        answer: dict[str, Any] = await resp.json()
        return answer


async def timed(n: int, call: Call) -> list[float]:
    """Run `call` n times in sequence; milliseconds each."""
    out = []
    for _ in range(n):
        began = time.perf_counter()
        await call()
        out.append((time.perf_counter() - began) * 1000)
    return out


@dataclass(frozen=True)
class Load:
    """A closed-loop load run: per-request latencies and the achieved rate."""

    latencies_ms: list[float]
    seconds: float

    @property
    def rps(self) -> float:
        return len(self.latencies_ms) / self.seconds if self.seconds else 0.0


async def run_load(calls: Sequence[Call], n: int, concurrency: int) -> Load:
    """`n` requests from `concurrency` workers; worker w always uses `calls[w % len(calls)]`."""
    latencies: list[float] = []
    remaining = [n]

    async def worker(w: int) -> None:
        call = calls[w % len(calls)]
        while remaining[0] > 0:
            remaining[0] -= 1
            latencies.extend(await timed(1, call))

    began = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return Load(latencies, time.perf_counter() - began)


def session(concurrency: int = 64) -> aiohttp.ClientSession:
    """A client session with enough pooled connections and no overall timeout surprises."""
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=300))


# ---- processes ----------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Server:
    """A server subprocess on loopback; `url` is its OpenAI base URL (ending in /v1)."""

    name: str
    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def chat_url(self) -> str:
        return self.url + "/chat/completions"

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM this process (only this one), then SIGKILL if it does not exit in time."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout_s)


def spawn(name: str, argv: list[str], port: int, ready_path: str, log: Path,
          env: dict[str, str] | None = None, timeout_s: float = 90.0) -> Server:
    """Start `argv` and wait until GET ready_path answers 200 (raises with the log tail otherwise)."""
    base = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                env={**os.environ, **(env or {})}, start_new_session=True)
    server = Server(name, base + "/v1", proc, log)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if _answers(base + ready_path):
            return server
        time.sleep(0.1)
    server.stop()
    tail = log.read_text(errors="replace")[-2000:]
    raise RuntimeError(f"{name} did not become ready on port {port}:\n{tail}")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 (loopback only)
            return bool(resp.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def start_upstream(workdir: Path) -> Server:
    """The fake OpenAI upstream in its own process."""
    port = free_port()
    argv = [sys.executable, "-m", "bench.common", "upstream", "--port", str(port)]
    return spawn("fake upstream", argv, port, "/v1/models", workdir / "upstream.log")


def start_floor(workdir: Path, upstream_url: str) -> Server:
    """The bare forwarder (bench/floor.py) in its own process."""
    port = free_port()
    argv = [sys.executable, "-m", "bench.floor", "--port", str(port), "--upstream", upstream_url]
    return spawn("floor", argv, port, "/v1/models", workdir / "floor.log")


def ctxproxy_config(upstream_url: str, db: Path, window: int, extractive: bool = False,
                    background: bool = True, store: Mapping[str, int] | None = None,
                    claude: bool = True) -> str:
    """YAML for `ctxproxy serve`: a chat model and (`claude`) a Claude model routed to the fake
    upstream (an `anthropic/` entry: litellm is loaded for it); `store`: more store keys."""
    lines = ["model_list:", f"  - model_name: {MODEL}", "    litellm_params:",
             f"      model: openai/{MODEL}", f"      api_base: {upstream_url}",
             f"    context_window: {window}"]
    if claude:  # the fake's Messages API
        lines += [f"  - model_name: {CLAUDE_MODEL}", "    litellm_params:",
                  f"      model: anthropic/{CLAUDE_MODEL}",
                  f"      api_base: {upstream_url.removesuffix('/v1')}", f"    context_window: {window}"]
    lines += ["compaction:", f"  background: {str(background).lower()}",
             "store:", f"  path: {db}", *(f"  {k}: {v}" for k, v in (store or {}).items()),
             "server:", "  log_level: info"]
    if extractive:
        lines += ["summarizer:", "  model: local/extractive"]
    return "\n".join(lines) + "\n"


def start_ctxproxy(workdir: Path, upstream_url: str, window: int = 1_000_000, extractive: bool = False,
                   name: str = "ctxproxy", store: Mapping[str, int] | None = None,
                   claude: bool = True) -> Server:
    """`ctxproxy serve` as a subprocess with its own store under `workdir` (`store`: more store keys;
    `claude`: with the Claude entry)."""
    cfg = workdir / f"{name}.yaml"
    cfg.write_text(ctxproxy_config(upstream_url, workdir / f"{name}.db", window, extractive, store=store,
                                   claude=claude))
    port = free_port()
    argv = [sys.executable, "-m", "proxy", "serve", "--config", str(cfg), "--port", str(port)]
    return spawn(name, argv, port, "/readyz", workdir / f"{name}.log")


# ---- /proc ----------------------------------------------------------------------------------------

def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (all its threads, including exited ones), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[int]:
    """A process and every live descendant (a master and its workers), from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += children.get(current, [])
    return tree


def tree_cpu_seconds(pid: int) -> float:
    """`cpu_seconds` of a process and of every live descendant."""
    return _tree_sum(pid, cpu_seconds)


def tree_rss_mb(pid: int) -> float:
    """VmRSS of a process and of every live descendant, in MiB (pages shared by them count twice)."""
    return _tree_sum(pid, rss_mb)


def _tree_sum(pid: int, measure: Callable[[int], float]) -> float:
    total = 0.0
    for member in process_tree(pid):
        with contextlib.suppress(OSError):  # exited meanwhile
            total += measure(member)
    return total


def rss_mb(pid: int) -> float:
    """Resident set size of a process in MiB (VmRSS)."""
    return rss_split(pid)["rss"]


def rss_split(pid: int) -> dict[str, float]:
    """VmRSS and its parts in MiB: anonymous (heap: the Python objects, malloc arenas), file-backed
    (the code, and SQLite's memory-mapped database pages) and shared memory, from /proc/PID/status."""
    fields = {"VmRSS:": "rss", "RssAnon:": "anon", "RssFile:": "file", "RssShmem:": "shmem"}
    out = dict.fromkeys(fields.values(), 0.0)
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key = line.split(maxsplit=1)[0] if line else ""
        if key in fields:
            out[fields[key]] = int(line.split()[1]) / 1024
    return out


def mapped_mb(pid: int, path: Path) -> float:
    """Resident MiB of a process's memory maps of `path` (SQLite's mmap of the store), from smaps."""
    total, inside, name = 0, False, str(path)
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split(maxsplit=5)
        if len(head) >= 5 and "-" in head[0] and not head[0].endswith(":"):
            inside = len(head) == 6 and head[5] == name
        elif inside and head and head[0] == "Rss:":
            total += int(head[1])
    return total / 1024


# ---- the fake upstream process --------------------------------------------------------------------

def upstream_app() -> Any:
    """A fast fake provider: the test fake's JSON/SSE shapes, answering "ok", recording nothing."""
    from aiohttp import web

    from tests.fakes import responses_api
    from tests.fakes.anthropic_upstream import MessageReply, message_json
    from tests.fakes.upstream import Reply, completion_json, stream_events

    reply = Reply(text="ok")

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if not body.get("stream"):
            return web.json_response(completion_json(body, reply))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in stream_events(body, reply):
            await response.write(event)
        await response.write_eof()
        return response

    async def responses(request: web.Request) -> web.Response:  # non-streaming only (route_cpu)
        body = await request.json()
        items = responses_api.output_items("ok", [], False, "")
        return web.json_response(responses_api.response_json(body, items))

    async def messages(request: web.Request) -> web.Response:  # Anthropic's, non-streaming only
        return web.json_response(message_json(await request.json(), MessageReply(text="ok")))

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    app = web.Application(client_max_size=256 * 1024 * 1024)
    for prefix in ("/v1", ""):
        app.router.add_post(f"{prefix}/chat/completions", completions)
        app.router.add_post(f"{prefix}/responses", responses)
    app.router.add_post("/v1/messages", messages)
    app.router.add_get("/v1/models", models)
    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="benchmark helpers")
    parser.add_argument("command", choices=["upstream"])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    from aiohttp import web

    web.run_app(upstream_app(), host="127.0.0.1", port=args.port, print=None, access_log=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
