"""Agent CLIs' request shapes through the HTTP interface: each session is one conversation, and its
uncompacted resends are forwarded early with no mismatch (Codex on Responses, Claude Code on
Messages, opencode on chat completions)."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from proxy import appkeys
from tests.conftest import TEST_API_KEY, ProxyFactory, settled
from tests.fakes.upstream import FakeUpstream, Reply, tool_call

JSON = dict[str, Any]
HEADERS = {"Content-Type": "application/json", "Authorization": f"Bearer {TEST_API_KEY}"}
CODEX_TOOLS = [{"type": "function", "name": "shell", "description": "Runs a shell command.", "strict": False,
                "parameters": {"type": "object", "properties": {"command": {"type": "array",
                                                                             "items": {"type": "string"}}},
                               "required": ["command"]}}]


async def _metric(server: TestServer, name: str) -> float:
    async with aiohttp.ClientSession() as http:
        text = await (await http.get(server.make_url("/metrics"))).text()
    return float(next(line.split()[1] for line in text.splitlines() if line.startswith(name + " ")))


async def _post(server: TestServer, path: str, body: JSON) -> tuple[str, list[JSON]]:
    """The conversation id header and the SSE events' data of one streamed request."""
    async with aiohttp.ClientSession() as http, http.post(server.make_url(path), data=json.dumps(body),
                                                          headers=HEADERS) as resp:
        assert resp.status == 200, await resp.text()
        raw = await resp.text()
        events = [json.loads(line[6:]) for line in raw.splitlines()
                  if line.startswith("data: ") and line[6:].startswith("{")]
        return resp.headers["X-Ctxproxy-Conversation-Id"], events


def _codex_echo(item: JSON) -> JSON:
    """An output item as Codex sends it back: no id, no status, message text parts without annotations."""
    out = {k: v for k, v in item.items() if k not in ("id", "status")}
    if item["type"] == "message":
        out["content"] = [{"type": "output_text", "text": p["text"]} for p in item["content"]]
    return out


async def test_codex_resends_are_one_conversation_forwarded_early_without_mismatch(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream) -> None:
    server = await make_proxy()
    items: list[JSON] = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sandbox: rw"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<env>cwd=/w</env>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the tests"}]}]
    conversations = set()
    for step in range(6):
        call = tool_call(f"call_{step}", "shell", {"command": ["ls", str(step)]})
        fake_upstream.queue(Reply(text=None, reasoning=True, tool_calls=[call]))
        body = {"model": "gpt-4o-mini", "instructions": "You are Codex.", "input": items,
                "tools": CODEX_TOOLS,
                "tool_choice": "auto", "parallel_tool_calls": False, "reasoning": {"effort": "medium"},
                "store": False, "stream": True, "include": ["reasoning.encrypted_content"],
                "prompt_cache_key": "session-1"}
        conversation, events = await _post(server, "/v1/responses", body)
        conversations.add(conversation)
        assert fake_upstream.last_body["input"] == items
        done = next(e for e in events if e.get("type") == "response.completed")
        items = [*items, *(_codex_echo(i) for i in done["response"]["output"]),
                 {"type": "function_call_output", "call_id": f"call_{step}", "output": f"out {step}"}]
    await settled(server)
    assert len(conversations) == 1
    assert await _metric(server, "ctxproxy_early_forwards_total") == 5
    assert await _metric(server, "ctxproxy_early_forward_mismatches_total") == 0
    store = server.app[appkeys.STORE]
    assert len(store.for_tenant(store.tenant_id_for_key(TEST_API_KEY)).list_conversations()) == 1
