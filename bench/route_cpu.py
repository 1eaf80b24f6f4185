"""Per-request CPU of a resent ~100k-token history on each route: chat, Messages, Responses.

An agent loop over one conversation per route, each request resending the whole history plus the
previous reply and a new user message (the store holds the history after the warm-up; nothing is
compacted). The same history goes to `/v1/chat/completions`, `/v1/messages` (Anthropic shape) and
`/v1/responses` (Responses `input` items); ctxproxy forwards each in its own API to the fake
upstream (Messages to its Anthropic endpoint, a Claude model entry).
CPU is the proxy process's user+system time from /proc per request; the routes take turns, so
drift hits them alike, each with its own API key (a tenant's resent-body memory holds its last
body). Target: Messages and Responses within 1.2x chat's CPU.

    python -m bench.route_cpu [--tokens N] [--n N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bench.common import (
    CLAUDE_MODEL,
    HEADERS,
    MODEL,
    Server,
    cpu_seconds,
    history,
    session,
    start_ctxproxy,
    start_upstream,
)

ROUTES = ("chat", "messages", "responses")
TARGET_RATIO = 1.2


@dataclass(frozen=True)
class Plan:
    tokens: int = 100_000
    requests: int = 300  # per route, after the warm-up (CPU is read in 10 ms ticks: many requests)
    warmup: int = 3


def _chat_body(system: str, turns: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "system", "content": system}, *turns]}


def _messages_body(system: str, turns: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": CLAUDE_MODEL, "max_tokens": 256, "system": system,
            "messages": [{"role": t["role"], "content": [{"type": "text", "text": t["content"]}]}
                         for t in turns]}


def _responses_body(system: str, turns: list[dict[str, Any]]) -> dict[str, Any]:
    kind = {"user": "input_text", "assistant": "output_text"}
    items = [{"type": "message", "role": t["role"],
              "content": [{"type": kind[t["role"]], "text": t["content"]}]} for t in turns]
    return {"model": MODEL, "instructions": system, "input": items}


def _chat_reply(answer: dict[str, Any]) -> str:
    return str(answer["choices"][0]["message"].get("content") or "")


def _messages_reply(answer: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in answer["content"] if b.get("type") == "text")


def _responses_reply(answer: dict[str, Any]) -> str:
    return "".join(part.get("text", "") for item in answer["output"] if item.get("type") == "message"
                   for part in item["content"] if part.get("type") == "output_text")


SHAPES: dict[str, tuple[str, Callable[[str, list[dict[str, Any]]], dict[str, Any]],
                        Callable[[dict[str, Any]], str]]] = {
    "chat": ("/chat/completions", _chat_body, _chat_reply),
    "messages": ("/messages", _messages_body, _messages_reply),
    "responses": ("/responses", _responses_body, _responses_reply),
}


@dataclass
class Loop:
    """One route's conversation: the history, resent each turn with the reply and a new question."""

    route: str
    system: str
    turns: list[dict[str, Any]]
    cpu_s: list[float] = field(default_factory=list)

    @classmethod
    def of(cls, route: str, tokens: int) -> Loop:
        messages = history(tokens, f" ({route})")  # no bracket before the history array: see resent_body.py
        return cls(route, str(messages[0]["content"]), messages[1:])

    async def send(self, http: aiohttp.ClientSession, proxy: Server) -> None:
        path, body, reply = SHAPES[self.route]
        data = json.dumps(body(self.system, self.turns)).encode()
        headers = {**HEADERS, "Authorization": f"Bearer sk-bench-{self.route}",
                   "anthropic-version": "2023-06-01"}
        async with http.post(proxy.url + path, data=data, headers=headers) as resp:
            if resp.status != 200:
                raise RuntimeError(f"{self.route}: {resp.status} {(await resp.text())[:300]}")
            answer = await resp.json()
        self.turns += [{"role": "assistant", "content": reply(answer) or "ok"},
                       {"role": "user", "content": f"next step {len(self.turns)}, please"}]


async def run(plan: Plan) -> dict[str, Any]:
    """The routes in turn, one request each per round; CPU per request on each."""
    with tempfile.TemporaryDirectory(prefix="ctxroutes-") as tmp:
        work = Path(tmp)
        upstream = start_upstream(work)
        proxy = start_ctxproxy(work, upstream.url, window=1_000_000, name="ctx-routes")
        try:
            async with session(4) as http:
                loops = [Loop.of(route, plan.tokens) for route in ROUTES]
                for _ in range(plan.warmup):
                    for loop in loops:
                        await loop.send(http, proxy)
                for _ in range(plan.requests):
                    for loop in loops:
                        before = cpu_seconds(proxy.proc.pid)
                        await loop.send(http, proxy)
                        loop.cpu_s.append(cpu_seconds(proxy.proc.pid) - before)
        finally:
            proxy.stop()
            upstream.stop()
    cpu = {loop.route: sum(loop.cpu_s) * 1000 / len(loop.cpu_s) for loop in loops}
    chat = cpu["chat"]  # 0 only when too few requests to register a 10 ms tick (a smoke run)
    return {"tokens": plan.tokens, "requests": plan.requests,
            "routes": {r: {"cpu_ms": round(cpu[r], 2), "vs_chat": round(cpu[r] / chat, 2) if chat else 0.0}
                       for r in ROUTES}}


def table(result: dict[str, Any]) -> str:
    lines = [f"per-request CPU on a resent ~{result['tokens'] // 1000}k-token history "
             f"({result['requests']} requests per route, routes in turn)",
             f"{'route':>10}{'CPU ms':>9}{'vs chat':>9}"]
    for route, r in result["routes"].items():
        lines.append(f"{route:>10}{r['cpu_ms']:>9.2f}{r['vs_chat']:>8.2f}x")
    worst = max(r["vs_chat"] for r in result["routes"].values())
    lines.append(f"worst route vs chat: {worst:.2f}x (target <= {TARGET_RATIO}x: "
                 f"{'met' if worst <= TARGET_RATIO else 'not met'})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tokens", type=int, default=Plan.tokens)
    parser.add_argument("--n", type=int, default=Plan.requests)
    args = parser.parse_args(argv)
    print(table(asyncio.run(run(Plan(tokens=args.tokens, requests=args.n)))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
