"""Agent CLIs' request shapes through the HTTP interface: each session is one conversation, and its
uncompacted resends are forwarded early with no mismatch (Codex on Responses, Claude Code on
Messages, opencode on chat completions)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from config.settings import LiteLLMParams, ModelEntry, Settings, StoreSettings
from proxy import appkeys
from tests.conftest import TEST_API_KEY, ProxyFactory, settled
from tests.fakes.anthropic_upstream import FakeAnthropic, MessageReply, content_blocks
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
    data = json.dumps(body, separators=(",", ":"))  # compact, as the agent CLIs write their bodies
    async with aiohttp.ClientSession() as http, http.post(server.make_url(path), data=data,
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


async def test_codex_resends_are_forwarded_from_the_http_loop(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream) -> None:
    """A large Codex resend is parsed past its shared `input` items and decided on the HTTP loop
    (proxy/wire/responses.py `Translations`): the provider has it while the engine thread is blocked."""
    server = await make_proxy()
    items: list[JSON] = [{"type": "message", "role": "user",
                          "content": [{"type": "input_text", "text": "go"}]}]
    for step in range(4):
        call = tool_call(f"call_{step}", "shell", {"command": ["cat", f"log_{step}"]})
        fake_upstream.queue(Reply(text=None, reasoning=True, tool_calls=[call]))
        body = {"model": "gpt-4o-mini", "stream": True, "input": items, "tools": CODEX_TOOLS, "store": False}
        if step == 3:  # the engine thread busy: only the HTTP loop can forward it
            await settled(server)
            blocked = asyncio.create_task(server.app[appkeys.HOST].run(lambda: time.sleep(1.0)))
            answering = asyncio.create_task(_post(server, "/v1/responses", body))
            for _ in range(100):
                if len(fake_upstream.requests) == 4:
                    break
                await asyncio.sleep(0.005)
            assert len(fake_upstream.requests) == 4 and not blocked.done()
            await answering
            break
        _, events = await _post(server, "/v1/responses", body)
        done = next(e for e in events if e.get("type") == "response.completed")
        items = [*items, *(_codex_echo(i) for i in done["response"]["output"]),
                 {"type": "function_call_output", "call_id": f"call_{step}", "output": "ok " * 6_000}]
    assert fake_upstream.last_body["input"] == items
    await settled(server)
    assert await _metric(server, "ctxproxy_early_forward_mismatches_total") == 0



def _marked(blocks: list[JSON]) -> list[JSON]:
    """Blocks with Claude Code's cache mark on the last one."""
    return [*blocks[:-1], {**blocks[-1], "cache_control": {"type": "ephemeral"}}]


def _unmarked(message: JSON) -> JSON:
    """A message as Claude Code resends it once it is no longer the newest: its mark moved on."""
    content = message["content"]
    if not isinstance(content, list):
        return message
    return {**message, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in content]}


CLAUDE_SYSTEM = [{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
                 {"type": "text", "text": "Working directory: /w", "cache_control": {"type": "ephemeral"}}]
CLAUDE_TOOLS = [{"name": "Bash", "description": "Runs a command.",
                 "input_schema": {"type": "object", "properties": {"command": {"type": "string"}},
                                  "required": ["command"]}}]


async def test_claude_code_resends_are_forwarded_early_whatever_the_moving_cache_mark(
        make_proxy: ProxyFactory, fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    params = LiteLLMParams("anthropic/claude-sonnet-4-5", fake_anthropic.url)
    entry = ModelEntry("claude-test", params, 200_000)
    server = await make_proxy(Settings(model_list=(entry,), store=StoreSettings(str(tmp_path / "s.db"))))
    history: list[JSON] = [{"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>todo list empty</system-reminder>"},
        {"type": "text", "text": "fix the failing test"}]}]
    conversations = set()
    for step in range(6):
        use = {"id": f"toolu_{step}", "name": "Bash", "input": {"command": f"ls {step}"}}
        script = MessageReply(text=f"step {step}", thinking=f"think {step}", tool_uses=[use])
        fake_anthropic.queue(script)
        sent = [*map(_unmarked, history[:-1]), {**history[-1], "content": _marked(history[-1]["content"])}]
        body = {"model": "claude-test", "system": CLAUDE_SYSTEM, "tools": CLAUDE_TOOLS, "messages": sent,
                "max_tokens": 32000, "stream": True, "metadata": {"user_id": "user_abc_session_1"}}
        conversation, _ = await _post(server, "/v1/messages", body)
        conversations.add(conversation)
        assert fake_anthropic.last_body["messages"] == sent  # the client's marks, where it put them
        assert fake_anthropic.last_body["system"] == CLAUDE_SYSTEM
        history += [{"role": "assistant", "content": content_blocks(script)},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{step}",
                                                  "content": f"out {step}"}]}]
    await settled(server)
    assert len(conversations) == 1
    assert await _metric(server, "ctxproxy_early_forwards_total") == 5
    assert await _metric(server, "ctxproxy_early_forward_mismatches_total") == 0


async def test_claude_code_resends_are_forwarded_from_the_http_loop(
        make_proxy: ProxyFactory, fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    """A large Claude Code resend (its previous newest turn parsed again: the mark moved off it) is
    decided on the HTTP loop (proxy/wire/anthropic.py `Translations`, compaction/resend/previous.py
    `extension`): the provider has it while the engine thread is still blocked."""
    params = LiteLLMParams("anthropic/claude-sonnet-4-5", fake_anthropic.url)
    server = await make_proxy(Settings(model_list=(ModelEntry("claude-test", params, 200_000),),
                                       store=StoreSettings(str(tmp_path / "s.db"))))
    history: list[JSON] = [{"role": "user", "content": [{"type": "text", "text": "fix the failing test"}]}]
    for step in range(4):
        use = {"id": f"toolu_{step}", "name": "Bash", "input": {"command": f"cat log_{step}"}}
        script = MessageReply(text=f"step {step}", tool_uses=[use])
        fake_anthropic.queue(script)
        sent = [*map(_unmarked, history[:-1]), {**history[-1], "content": _marked(history[-1]["content"])}]
        body = {"model": "claude-test", "messages": sent, "system": CLAUDE_SYSTEM, "tools": CLAUDE_TOOLS,
                "max_tokens": 32000, "stream": True}  # Claude Code's key order
        if step == 3:  # the engine thread busy: only the HTTP loop can forward it
            await settled(server)
            blocked = asyncio.create_task(server.app[appkeys.HOST].run(lambda: time.sleep(1.0)))
            answering = asyncio.create_task(_post(server, "/v1/messages", body))
            for _ in range(100):
                if len(fake_anthropic.requests) == 4:
                    break
                await asyncio.sleep(0.005)
            assert len(fake_anthropic.requests) == 4 and not blocked.done()
            await answering
            break
        await _post(server, "/v1/messages", body)
        history += [{"role": "assistant", "content": content_blocks(script)},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{step}",
                                                  "content": f"log {step}: " + "ok " * 6_000}]}]
    assert fake_anthropic.last_body["messages"] == sent
    await settled(server)
    assert await _metric(server, "ctxproxy_early_forward_mismatches_total") == 0


async def test_opencode_reserialised_arguments_are_one_conversation_forwarded_early(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream) -> None:
    server = await make_proxy()
    history: list[JSON] = [{"role": "system", "content": "You are opencode, an interactive CLI tool."},
                           {"role": "user", "content": "fix the failing test"}]
    schema = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
    tools = [{"type": "function",
              "function": {"name": "bash", "description": "Runs a command.", "parameters": schema}}]
    conversations = set()
    for step in range(6):
        arguments = {"command": f"ls {step}", "description": "Lists files"}
        fake_upstream.queue(Reply(text=None, tool_calls=[tool_call(f"call_{step}", "bash", arguments)]))
        body = {"model": "gpt-4o-mini", "messages": history, "tools": tools, "stream": True,
                "stream_options": {"include_usage": True}, "max_tokens": 32000}
        conversation, _ = await _post(server, "/v1/chat/completions", body)
        conversations.add(conversation)
        assert fake_upstream.last_body["messages"] == history
        respaced = json.dumps(dict(reversed(arguments.items())), separators=(",", ":"))  # not as received
        history += [{"role": "assistant", "content": "", "tool_calls": [{
                        "id": f"call_{step}", "type": "function",
                        "function": {"name": "bash", "arguments": respaced}}]},
                    {"role": "tool", "tool_call_id": f"call_{step}", "content": f"out {step}"}]
    await settled(server)
    assert len(conversations) == 1
    assert await _metric(server, "ctxproxy_early_forwards_total") == 5
    assert await _metric(server, "ctxproxy_early_forward_mismatches_total") == 0
    store = server.app[appkeys.STORE]
    [stored] = store.for_tenant(store.tenant_id_for_key(TEST_API_KEY)).list_conversations()
    assert stored.message_count == len(history) - 1  # every message stored once, no copies
