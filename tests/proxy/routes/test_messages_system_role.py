"""POST /v1/messages with `system` entries inside `messages`, as Claude Code's default tools send them."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from compaction.toolpairs import pairing_violations
from config.settings import (
    CompactionSettings,
    LiteLLMParams,
    ModelEntry,
    Settings,
    StoreSettings,
    SummarizerSettings,
)
from proxy.wire.anthropic import from_messages, to_messages, with_client_marks
from proxy.wire.anthropic_translate import plain
from tests.agents.validate import anthropic_violations
from tests.conftest import TEST_API_KEY, ProxyFactory
from tests.fakes.anthropic_upstream import FakeAnthropic, MessageReply
from tests.fakes.upstream import FakeUpstream, Reply

JSON = dict[str, Any]
WINDOW = 4096
EPHEMERAL = {"type": "ephemeral"}
TOOL: JSON = {"name": "Read", "description": "Read a file.",
              "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}



@pytest.fixture
async def server(make_proxy: ProxyFactory, fake_anthropic: FakeAnthropic, fake_upstream: FakeUpstream,
                 tmp_path: Path) -> TestServer:
    """ctxproxy with a large-window and a small-window Anthropic entry, and a chat entry."""
    compaction = CompactionSettings(background=False)
    models = (
        ModelEntry("claude-test", LiteLLMParams("anthropic/claude-sonnet-4-5", fake_anthropic.url), 200_000,
                   compaction),
        ModelEntry("claude-small", LiteLLMParams("anthropic/claude-haiku", fake_anthropic.url), WINDOW,
                   compaction),
        ModelEntry("gpt-4o-mini", LiteLLMParams("openai/gpt-4o-mini", fake_upstream.url), 128_000),
    )
    settings = Settings(model_list=models, compaction=compaction, store=StoreSettings(str(tmp_path / "s.db")),
                        summarizer=SummarizerSettings(model="local/extractive"))
    return await make_proxy(settings, log_stream=io.StringIO())


def _round(i: int, note: bool) -> list[JSON]:
    """One Read round; with `note`, a system note between the tool_use and its tool_result."""
    use = {"type": "tool_use", "id": f"toolu_{i}", "name": "Read",
           "input": {"file_path": f"/w/notes_{i}.txt"}}
    lines = "\n".join(f"{j}: ledger entry {j} of file {i}, posted to account ACC-{i}{j:02d}"
                      for j in range(14))
    turns = [{"role": "assistant", "content": [{"type": "text", "text": f"Reading notes {i}."}, use]}]
    if note:
        note_text = f"<system-reminder>Task list updated after step {i}.</system-reminder>"
        turns.append({"role": "system", "content": [{"type": "text", "text": note_text}]})
    turns.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}",
                                               "content": lines}]})
    return turns


def claude_code_body(model: str, rounds: int, stream: bool) -> JSON:
    """A Claude-Code-shaped request: system blocks with a cache mark, MCP instructions and notes as
    `system` entries of `messages` (one between a tool_use and its tool_result every other round)."""
    messages: list[JSON] = [
        {"role": "user", "content": [{"type": "text", "text": "<system-reminder>cwd /w</system-reminder>"},
                                     {"type": "text", "text": "Edit every notes file in REPO-7731."}]},
        {"role": "system", "content": "MCP server instructions: the ledger server answers ledger questions."},
    ]
    for i in range(rounds):
        messages += _round(i, note=i % 2 == 1)
    messages.append({"role": "system", "content": [
        {"type": "text", "text": "Skill notes: keep edits small.", "cache_control": EPHEMERAL}]})
    messages.append({"role": "user", "content": [
        {"type": "text", "text": "Which repo are we in?", "cache_control": EPHEMERAL}]})
    return {"model": model, "max_tokens": 512, "stream": stream, "tools": [TOOL], "messages": messages,
            "system": [{"type": "text", "text": "You are Claude Code."},
                       {"type": "text", "text": "Use the tools.", "cache_control": EPHEMERAL}]}


async def post(server: TestServer, body: JSON, path: str = "/v1/messages") -> tuple[int, str]:
    """POST `path` with the anthropic SDK's headers; (status, body text)."""
    headers = {"x-api-key": TEST_API_KEY, "anthropic-version": "2023-06-01"}
    async with aiohttp.ClientSession() as http, http.post(server.make_url(path), json=body,
                                                           headers=headers) as reply:
        return reply.status, await reply.text()


def replied_text(text: str, stream: bool) -> str:
    """The reply's text, from the JSON message or the text deltas of the event stream."""
    if not stream:
        return "".join(b["text"] for b in json.loads(text)["content"] if b["type"] == "text")
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    assert events[-1]["type"] == "message_stop"
    return "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")


def entry_blocks(messages: list[JSON]) -> list[JSON]:
    """The `system` entries of `messages` as system blocks, in order (their cache marks kept)."""
    blocks = [m["content"] for m in messages if m["role"] == "system"]
    return [b for c in blocks for b in ([{"type": "text", "text": c}] if isinstance(c, str) else c)]


def assert_hoisted(sent: JSON, body: JSON) -> None:
    """Compacted: the client's `system`, then its `system` entries (moved before the first turn by
    the engine, so joined to `system`), then ctxproxy's anchors and summaries; none left in `messages`."""
    entries = entry_blocks(body["messages"])
    assert sent["system"][:len(body["system"]) + len(entries)] == [*body["system"], *entries]
    assert [m for m in sent["messages"] if m["role"] == "system"] == []


@pytest.mark.parametrize("stream", [False, True])
async def test_system_entries_are_forwarded_unchanged_when_nothing_is_compacted(
    server: TestServer, fake_anthropic: FakeAnthropic, stream: bool
) -> None:
    body = claude_code_body("claude-test", 6, stream)
    fake_anthropic.queue(MessageReply(text="REPO-7731."))
    status, text = await post(server, body)
    assert status == 200, text
    assert replied_text(text, stream) == "REPO-7731."
    assert fake_anthropic.last_body == {**body, "model": "claude-sonnet-4-5"}


@pytest.mark.parametrize("stream", [False, True])
async def test_system_entries_survive_compaction_without_splitting_a_tool_round(
    server: TestServer, fake_anthropic: FakeAnthropic, stream: bool
) -> None:
    body = claude_code_body("claude-small", 30, stream)
    fake_anthropic.queue(MessageReply(text="REPO-7731."))
    status, text = await post(server, body)
    assert status == 200, text
    assert replied_text(text, stream) == "REPO-7731."
    sent = fake_anthropic.last_body
    assert len(json.dumps(sent)) < len(json.dumps(body)) // 2  # compacted
    assert anthropic_violations(sent) == []
    assert pairing_violations([plain(m) for m in to_messages(sent)]) == []
    assert_hoisted(sent, body)
    assert sent["messages"][-1]["content"][-1] == body["messages"][-1]["content"][-1]


async def test_the_last_round_keeps_its_system_note_inside_when_compacted(
    server: TestServer, fake_anthropic: FakeAnthropic
) -> None:
    """A request ending in a round interrupted by a system note: the round reaches the provider whole."""
    body = claude_code_body("claude-small", 32, False)
    body["messages"] = body["messages"][:-2]  # ends with round 31: tool_use, system note, tool_result
    assert [m["role"] for m in body["messages"][-3:]] == ["assistant", "system", "user"]
    status, text = await post(server, body)
    assert status == 200, text
    sent = fake_anthropic.last_body
    assert len(json.dumps(sent)) < len(json.dumps(body)) // 2  # compacted
    assert anthropic_violations(sent) == []
    assert_hoisted(sent, body)
    assert sent["messages"][-1] == body["messages"][-1]
    assert sent["messages"][-2] == body["messages"][-3]


@pytest.mark.parametrize(("entry", "where"), [
    ({"role": "developer", "content": "x"}, "messages.1: each message needs role user, assistant or system"),
    ({"role": "system", "content": [{"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}]},
     "messages.1.content: a system message takes a string or text blocks"),
])
async def test_unknown_roles_and_non_text_system_entries_are_refused(
    server: TestServer, fake_anthropic: FakeAnthropic, entry: JSON, where: str
) -> None:
    body = {"model": "claude-test", "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}, entry, {"role": "user", "content": "again"}]}
    status, text = await post(server, body)
    assert status == 400
    assert json.loads(text) == {"type": "error", "error": {"type": "invalid_request_error", "message": where}}
    assert fake_anthropic.requests == []


async def test_a_chat_entry_gets_each_tool_result_right_after_its_call(
    server: TestServer, fake_upstream: FakeUpstream
) -> None:
    """Translated for a chat provider, a note inside a round follows the round's results."""
    fake_upstream.queue(Reply(text="REPO-7731."))
    body = claude_code_body("gpt-4o-mini", 2, False)
    status, text = await post(server, body)
    assert status == 200, text
    assert replied_text(text, False) == "REPO-7731."
    roles = [m["role"] for m in fake_upstream.last_body["messages"]]
    assert roles == ["system", "user", "system", "assistant", "tool", "assistant", "tool", "system", "system",
                     "user"]
    assert pairing_violations(fake_upstream.last_body["messages"]) == []


async def test_count_tokens_counts_system_entries(server: TestServer) -> None:
    body = claude_code_body("gpt-4o-mini", 2, False)
    status, text = await post(server, body, "/v1/messages/count_tokens")
    without = {**body, "messages": [m for m in body["messages"] if m["role"] != "system"]}
    status_without, text_without = await post(server, without, "/v1/messages/count_tokens")
    assert status == status_without == 200, text
    assert json.loads(text)["input_tokens"] > json.loads(text_without)["input_tokens"]


def test_entries_anywhere_go_back_as_sent() -> None:
    """Leading, mid-round and trailing entries, strings and marked text blocks: the same body back."""
    body = claude_code_body("claude-test", 2, False)
    note = {"role": "system", "content": [{"type": "text", "text": "lead", "cache_control": EPHEMERAL}]}
    messages = [note, *body["messages"], {"role": "system", "content": "trailing"}]
    system, turns = from_messages(to_messages({**body, "messages": messages}))
    assert (system, with_client_marks(turns, messages)) == (body["system"], messages)


def test_entries_the_engine_moved_before_the_first_turn_join_system() -> None:
    """With ctxproxy's own system messages in the list (compacted), entries before the first turn
    join `system` in order; one after the first turn stays in `messages`."""
    body = claude_code_body("claude-test", 1, False)
    canonical = to_messages(body)
    entries = [m for m in canonical[1:] if m["role"] == "system"]
    rest = [m for m in canonical[1:] if m["role"] != "system"]
    summary = {"role": "system", "content": "<ctxproxy:summary>earlier</ctxproxy:summary>"}
    system, turns = from_messages([canonical[0], entries[0], summary, rest[0], entries[1], *rest[1:]])
    assert system == [*body["system"], {"type": "text", "text": entries[0]["content"]},
                      {"type": "text", "text": summary["content"]}]
    assert [t["role"] for t in turns] == ["user", "system", "assistant", "user"]
    assert turns[1]["content"] == body["messages"][4]["content"]
