"""One agent CLI session through ctxproxy: the scripted provider, the real server as a subprocess, the CLI.

`run_session(agent, tmp)` starts the provider, writes ctxproxy's YAML config (the agent's models routed
to the provider, its loop model with a small `context_window`), starts `python -m proxy serve` with JSON
logs, runs the CLI in a scratch folder with a throwaway HOME and loopback-only proxies, and returns what
every side saw: the CLI's exit, the provider's requests, ctxproxy's request log lines and its store.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

import aiohttp
import orjson

from compaction.tokens import TokenCounter
from tests.agents.provider import AgentProvider, Received, Script
from tests.agents.trap import ProxyTrap
from tests.e2e.server_process import ROOT, ServerProcess, free_port

JSON = dict[str, Any]
CLIENT_KEY = "sk-agents-e2e-0123456789abcdef"
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
SKIP_KEYS = {"type", "id", "call_id", "tool_use_id", "role", "cache_control", "signature", "status",
             "encrypted_content", "model", "name"}
CLI_TIMEOUT_S = 600.0
ROUTES = {"anthropic": "/v1/messages", "responses": "/v1/responses", "chat": "/v1/chat/completions"}


class Agent(Protocol):
    """What a CLI adapter provides (see tests/agents/clis.py)."""

    name: str
    protocol: str  # "anthropic" | "responses" | "chat"
    model: str  # the loop's model: small window
    side_model: str  # titles, summaries: a large window
    window: int

    def script(self, work: Path) -> Script:
        """The scripted actions on the scratch files in `work`."""
        ...

    def is_main(self, body: JSON) -> bool:
        """Whether a request belongs to the agent loop."""
        ...

    def command(self, work: Path, home: Path, base_url: str) -> tuple[list[str], dict[str, str]]:
        """The CLI's argv and extra environment, talking to ctxproxy at `base_url`."""
        ...

    def stdin(self, work: Path) -> bytes:
        """What the CLI reads on its standard input."""
        ...


@dataclass
class Session:
    """What one CLI session left: its exit, the provider's view, ctxproxy's log and store."""

    agent: Agent
    returncode: int
    output: str
    seconds: float
    received: list[Received]
    unexpected: list[str]
    outside: list[str]  # what the CLI tried to reach past 127.0.0.1 (through the proxy trap)
    log: list[JSON]
    conversations: list[JSON]
    metrics: dict[str, float]  # ctxproxy's counters (/metrics) when the CLI was done
    work: Path
    tokens: list[int] = field(default_factory=list)
    replayed: list[float] = field(default_factory=list)  # overhead (ms) of `replay_uncompacted`


def ctxproxy_config(path: Path, agent: Agent, provider_base: str, store: Path) -> Path:
    """ctxproxy's YAML: the loop model with the agent's window, the side model with a large one."""
    prefix, base = (("anthropic", provider_base) if agent.protocol == "anthropic"
                    else ("openai", provider_base + "/v1"))
    entries = "".join(f"""  - model_name: {model}
    litellm_params:
      model: {prefix}/{model}
      api_base: {base}
      api_key: sk-provider-0123456789abcdef
    context_window: {window}
""" for model, window in ((agent.model, agent.window), (agent.side_model, 200_000)))
    path.write_text(f"""model_list:
{entries}summarizer:
  model: local/extractive
store:
  path: {store}
server:
  log_level: info
  log_format: json
""", encoding="utf-8")
    return path


async def run_session(agent: Agent, tmp: Path) -> Session:
    """Run the agent's whole scripted loop through a fresh ctxproxy and collect the evidence."""
    work, home = tmp / "work", tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    script = agent.script(work)
    provider = await AgentProvider(script, agent.is_main).start()
    trap = await ProxyTrap().start()
    store, log_path = tmp / "ctxproxy.db", tmp / "ctxproxy.log"
    config = ctxproxy_config(tmp / "ctxproxy.yaml", agent, provider.base, store)
    server = ServerProcess(config, free_port())
    try:
        with log_path.open("wb") as log_file:
            await _start_logged(server, log_file)
            started = time.monotonic()
            argv, env = agent.command(work, home, server.url)
            environment = _environment(home, trap.url, env)
            returncode, output = await _run_cli(argv, work, environment, agent.stdin(work))
            seconds = time.monotonic() - started
            metrics = await _counters(server.url)
            server.stop()
    finally:
        server.stop()
        await provider.close()
        await trap.close()
    counter = TokenCounter.for_model(agent.model)
    log = _log_lines(log_path)
    uncompacted = leading_uncompacted(agent, log, provider.received)
    replayed = await replay_uncompacted(agent, tmp / "replay", uncompacted)
    return Session(agent, returncode, output, seconds, provider.received, provider.unexpected,
                   trap.attempts, log, _conversations(store), metrics, work,
                   [received_tokens(r.body, counter) for r in provider.received], replayed)


def loop_lines(agent: Agent, log: list[JSON]) -> list[JSON]:
    """ctxproxy's request log lines of the loop's model on the CLI's route, in order."""
    route = ROUTES[agent.protocol]
    return [line for line in log if line.get("event") == "request" and line.get("path") == route
            and line.get("model") == agent.model]


def leading_uncompacted(agent: Agent, log: list[JSON], received: list[Received]) -> list[JSON]:
    """The loop's bodies up to its first compacted request: forwarded as received, so the CLI's own."""
    lines = loop_lines(agent, log)
    count = next((i for i, line in enumerate(lines) if line.get("compacted")), len(lines))
    return [r.body for r in received if r.main][:count]


async def replay_uncompacted(agent: Agent, tmp: Path, bodies: list[JSON]) -> list[float]:
    """ctxproxy's overhead (ms) on `bodies` sent again in order, as the CLI wrote them (compact JSON),
    to a fresh ctxproxy and provider, with the CLI no longer running: what ctxproxy adds to the CLI's
    requests without the CLI's own work competing for this machine's two cores."""
    tmp.mkdir(parents=True, exist_ok=True)
    work = tmp.parent / "work"  # the script answers as it did (its tool calls name these files)...
    shutil.copytree(work, tmp / "work")
    script = agent.script(work)  # ...and writes them anew: the CLI's edits are put back below
    shutil.rmtree(work)
    shutil.copytree(tmp / "work", work)
    provider = await AgentProvider(script, agent.is_main).start()
    log_path = tmp / "ctxproxy.log"
    server = ServerProcess(ctxproxy_config(tmp / "ctxproxy.yaml", agent, provider.base, tmp / "ctxproxy.db"),
                           free_port())
    headers = ({"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"} if agent.protocol == "anthropic"
               else {"Authorization": f"Bearer {CLIENT_KEY}"})
    headers["Content-Type"] = "application/json"
    try:
        with log_path.open("wb") as log_file:
            await _start_logged(server, log_file)
            async with aiohttp.ClientSession() as client:
                for body in bodies:
                    async with client.post(server.url + ROUTES[agent.protocol], data=orjson.dumps(body),
                                           headers=headers) as response:
                        await response.read()
            server.stop()
    finally:
        server.stop()
        await provider.close()
    return [float(line["overhead_ms"]) for line in loop_lines(agent, _log_lines(log_path))
            if line.get("overhead_ms") is not None]


async def _start_logged(server: ServerProcess, log_file: IO[bytes]) -> None:
    """Start `python -m proxy serve` with its stdout (the JSON log) into `log_file`."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    server.process = subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--config", str(server.config), "--port", str(server.port)],
        cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    await server._wait_ready()


def _environment(home: Path, proxy: str, extra: dict[str, str]) -> dict[str, str]:
    """A minimal environment: PATH, a throwaway HOME and XDG folders, every proxy the trap, the CLI's own."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
           "TERM": "dumb", "NO_COLOR": "1", "CI": "true",
           "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
           "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local/state"),
           "TMPDIR": str(home / "tmp")}
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    proxies = {name: proxy for name in PROXY_VARIABLES}
    return {**env, **proxies, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost", **extra}


async def _run_cli(argv: list[str], cwd: Path, env: dict[str, str], stdin: bytes) -> tuple[int, str]:
    """Run the CLI to its end (killed after CLI_TIMEOUT_S); its exit code and combined output."""
    process = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = await asyncio.wait_for(process.communicate(stdin), CLI_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        out, _ = await process.communicate()
        return -9, out.decode(errors="replace") + f"\n[killed after {CLI_TIMEOUT_S} s]"
    return int(process.returncode or 0), out.decode(errors="replace")


async def _counters(base_url: str) -> dict[str, float]:
    """ctxproxy's counters from GET /metrics (name with labels -> value; `_created` series left out)."""
    async with aiohttp.ClientSession() as client, client.get(base_url + "/metrics") as response:
        text = await response.text()
    counters: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name.startswith("ctxproxy_") and "_total" in name:
            counters[name] = float(value)
    return counters


def _log_lines(path: Path) -> list[JSON]:
    """ctxproxy's JSON log lines (anything else it printed is skipped)."""
    lines = []
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict):
            lines.append(line)
    return lines


def _conversations(store: Path) -> list[JSON]:
    """The conversations ctxproxy's SQLite store holds (id, model, message count, fork parent)."""
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT id, model, message_count, forked_from FROM conversations").fetchall()
    return [{"id": r[0], "model": r[1], "messages": r[2], "forked_from": r[3]} for r in rows]


def received_tokens(body: JSON, counter: TokenCounter) -> int:
    """Tokens of what the provider received: every text, tool argument and result, and the tool schemas."""
    parts = [body.get(k) for k in ("system", "instructions", "messages", "input")]
    texts = list(_strings(parts))
    texts += [json.dumps(t) for t in body.get("tools") or []]
    return sum(counter.count_text(t) for t in texts)


def _strings(value: Any) -> Any:
    """Every string inside `value`, skipping ids, types and other markers."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in SKIP_KEYS:
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
