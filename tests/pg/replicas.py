"""Real `python -m proxy serve` processes sharing one store, for the replica tests and the bench, and
the checks the replica tests share.

Each replica is a subprocess on its own loopback port, configured by one YAML file plus
`CTXPROXY_*` overrides (the store URL among them); its log goes to a file beside the config.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import aiohttp
import yaml

from store.postgres.store import PgStore
from tests.fakes.upstream import FakeUpstream

ROOT = Path(__file__).resolve().parents[2]
MODEL = "gpt-4o-mini"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(path: Path, upstream_url: str, summarizer_url: str | None, *, window: int = 8_000) -> Path:
    """The model on the fake upstream with a small window (compaction comes early); the summarizer is
    a second fake upstream (an LLM through litellm), or local/extractive when none is given."""
    summarizer = ({"model": "openai/fake-summarizer", "api_base": summarizer_url,
                   "api_key": "sk-summarizer-0123456789abcdef"} if summarizer_url
                  else {"model": "local/extractive"})
    config = {"model_list": [{"model_name": MODEL, "context_window": window,
                              "litellm_params": {"model": "openai/" + MODEL, "api_base": upstream_url}}],
              "summarizer": summarizer,
              "compaction": {"summarize_message_threshold": 6, "fresh_tail_count": 4},
              "server": {"log_level": "warning", "upstream_timeout_s": 60}}
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@dataclass
class Replica:
    """One serving process."""

    proc: subprocess.Popen[bytes]
    port: int
    log: IO[bytes]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, open transactions die with the connection."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


def start_replica(config: Path, env: dict[str, str], *, extra_args: tuple[str, ...] = ()) -> Replica:
    """Spawn `python -m proxy serve` (not yet ready: await `wait_ready`)."""
    port = free_port()
    log = open(config.with_suffix(f".{port}.log"), "wb")  # noqa: SIM115 - closed by Replica.stop
    full_env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "CTXPROXY_CONFIG": str(config), **env}
    proc = subprocess.Popen([sys.executable, "-m", "proxy", "serve", "--port", str(port), *extra_args],
                            cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT)
    return Replica(proc, port, log)


async def wait_ready(replica: Replica, timeout_s: float = 120.0) -> None:
    """Poll /readyz until it answers 200 (the process must stay alive meanwhile)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    async with aiohttp.ClientSession() as http:
        while loop.time() < deadline:
            if replica.proc.poll() is not None:
                raise AssertionError(f"replica exited: {Path(replica.log.name).read_text()[-2000:]}")
            try:
                async with http.get(replica.base_url + "/readyz") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise AssertionError(f"replica on port {replica.port} not ready within {timeout_s} s")


def check_one_clean_conversation(store: PgStore, key: str, messages: int) -> list[Any]:
    """One conversation holding every message exactly once; no summary stored twice (same sources,
    tier and level: a fallback level of the same chunk is another summary); the view's summaries
    never cover a message twice."""
    tenant = store.for_tenant(store.tenant_id_for_key(key))
    conversations = tenant.list_conversations()
    assert len(conversations) == 1, [c.id for c in conversations]
    cid = conversations[0].id
    assert [m.seq for m in tenant.messages(cid)] == list(range(messages))
    summaries = {s.id: s for s in tenant.summaries(cid)}
    identities = [(s.kind, s.depth, s.level, s.source_message_ids, s.source_summary_ids)
                  for s in summaries.values()]
    assert len(identities) == len(set(identities)), identities
    view = tenant.view(cid)
    ranges = sorted((summaries[i.ref].first_seq, summaries[i.ref].last_seq)
                    for i in (view.items if view else ()) if i.kind == "summary")
    assert all(p[1] < n[0] for p, n in zip(ranges, ranges[1:], strict=False)), ranges
    return tenant.summaries(cid)


def check_each_prompt_summarized_once(summarizer: FakeUpstream) -> None:
    """No two steps (of one replica or of two) sent the summarizer the same chunk at the same level
    and target: each step ran under its claim on the conversation (compaction/steps/claims.py)."""
    prompts = [json.dumps(r.body.get("messages"), sort_keys=True) for r in summarizer.requests]
    assert len(prompts) == len(set(prompts)), f"{len(prompts) - len(set(prompts))} repeated prompts"
