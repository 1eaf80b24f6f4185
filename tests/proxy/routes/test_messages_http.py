"""POST /v1/messages through the anthropic SDK: native forwarding, compaction, streams, errors."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import pytest
from aiohttp.test_utils import TestServer
from anthropic.types import MessageParam, ToolParam

from compaction.toolpairs import pairing_violations
from config.settings import (
    CompactionSettings,
    LiteLLMParams,
    ModelEntry,
    Settings,
    StoreSettings,
    SummarizerSettings,
)
from proxy.wire.anthropic import to_messages
from proxy.wire.anthropic_translate import plain
from tests.conftest import TEST_API_KEY, ProxyFactory
from tests.fakes.anthropic_upstream import SIGNATURE, FakeAnthropic, MessageReply
from tests.fakes.upstream import ErrorReply, FakeUpstream, Reply, tool_call

JSON = dict[str, Any]
WINDOW = 4096
TOOL: ToolParam = {
    "name": "read_file",
    "description": "Read a file.",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}


def _messages(raw: list[JSON]) -> list[MessageParam]:
    typed: list[MessageParam] = json.loads(json.dumps(raw))
    return typed



@pytest.fixture
async def server(
    make_proxy: ProxyFactory, fake_anthropic: FakeAnthropic, fake_upstream: FakeUpstream, tmp_path: Path
) -> TestServer:
    compaction = CompactionSettings(background=False)
    models = (
        ModelEntry(
            "claude-test",
            LiteLLMParams("anthropic/claude-sonnet-4-5", fake_anthropic.url),
            200_000,
            compaction,
        ),
        ModelEntry(
            "claude-small", LiteLLMParams("anthropic/claude-haiku", fake_anthropic.url), WINDOW, compaction
        ),
        ModelEntry("gpt-4o-mini", LiteLLMParams("openai/gpt-4o-mini", fake_upstream.url), 128_000),
    )
    settings = Settings(
        model_list=models,
        compaction=compaction,
        store=StoreSettings(str(tmp_path / "s.db")),
        summarizer=SummarizerSettings(model="local/extractive"),
    )
    return await make_proxy(settings, log_stream=LOGS.setdefault(str(tmp_path), io.StringIO()))


LOGS: dict[str, io.StringIO] = {}


@pytest.fixture
async def client(server: TestServer) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(
        base_url=str(server.make_url("")).rstrip("/"), api_key=TEST_API_KEY, max_retries=0
    ) as c:
        yield c


def agent_history(rounds: int) -> list[JSON]:
    """A task, then `rounds` tool rounds (signed thinking, tool_use, a long tool_result), a question."""
    history: list[JSON] = [{"role": "user", "content": "Refactor billing in repo INV-2093."}]
    for i in range(rounds):
        history += [
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": f"I should read module {i}.", "signature": f"sig-{i}"},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{i}",
                        "name": "read_file",
                        "input": {"path": f"src/billing_{i}.py"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{i}",
                        "content": "\n".join(
                            f"def charge_{i}_{j}(amount):  # rule {j} of module {i}\n    return amount * {j}"
                            for j in range(12)
                        ),
                    }
                ],
            },
        ]
    history.append({"role": "user", "content": "Which repo are we in?"})
    return history


async def test_native_non_streaming_with_headers_and_cache_reads(
    client: anthropic.AsyncAnthropic, fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.queue(MessageReply(text="Hello from Claude.", thinking="hmm", cache_read=120))
    raw = await client.messages.with_raw_response.create(
        model="claude-test",
        max_tokens=256,
        system="You are terse.",
        tools=[TOOL],
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"anthropic-beta": "beta-x", "anthropic-version": "2023-06-01"},
    )
    message = await raw.parse()
    assert message.content[0].type == "thinking" and message.content[0].signature == SIGNATURE
    assert message.content[1].type == "text" and message.content[1].text == "Hello from Claude."
    sent = fake_anthropic.requests[-1]
    assert sent.body["model"] == "claude-sonnet-4-5" and sent.body["system"] == "You are terse."
    assert sent.body["messages"] == [{"role": "user", "content": "hi"}] and sent.body["tools"] == [TOOL]
    assert sent.headers["x-api-key"] == TEST_API_KEY and sent.headers["anthropic-beta"] == "beta-x"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert raw.headers["request-id"] == "req_fake_anth" and raw.headers["X-Ctxproxy-Conversation-Id"]
    (line,) = [
        json.loads(x) for x in LOGS[str(tmp_path)].getvalue().splitlines() if '"event": "request"' in x
    ]
    assert (line["cache_read_tokens"], line["tokens_out"], line["path"]) == (120, 7, "/v1/messages")


async def test_thinking_and_tool_rounds_go_back_unchanged_and_continue_the_conversation(
    client: anthropic.AsyncAnthropic, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue(
        MessageReply(
            text=None,
            thinking="read it",
            tool_uses=[{"id": "toolu_1", "name": "read_file", "input": {"path": "a"}}],
        )
    )
    first = await client.messages.with_raw_response.create(
        model="claude-test", max_tokens=256, messages=[{"role": "user", "content": "go"}], tools=[TOOL]
    )
    content = [block.model_dump(exclude_none=True) for block in (await first.parse()).content]
    history: list[JSON] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": content},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x=1"},
                {"type": "text", "text": "and then?", "cache_control": {"type": "ephemeral"}},
            ],
        },
    ]
    second = await client.messages.with_raw_response.create(
        model="claude-test", max_tokens=256, messages=_messages(history), tools=[TOOL]
    )
    assert fake_anthropic.last_body["messages"] == history
    assert second.headers["X-Ctxproxy-Conversation-Id"] == first.headers["X-Ctxproxy-Conversation-Id"]


async def test_streaming_relays_events_and_the_helper_accumulates(
    client: anthropic.AsyncAnthropic, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue(
        MessageReply(
            text="streamed reply text",
            thinking="deep",
            tool_uses=[{"id": "toolu_9", "name": "read_file", "input": {"path": "b"}}],
        )
    )
    async with client.messages.stream(
        model="claude-test", max_tokens=256, tools=[TOOL], messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        text = "".join([piece async for piece in stream.text_stream])
        final = await stream.get_final_message()
    assert text == "streamed reply text"
    assert [b.type for b in final.content] == ["thinking", "text", "tool_use"]
    assert final.content[0].type == "thinking" and final.content[0].signature == SIGNATURE
    assert fake_anthropic.last_body["stream"] is True


async def test_a_broken_stream_ends_with_an_anthropic_error_event(
    client: anthropic.AsyncAnthropic, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue(MessageReply(text="never finished", cut_after=4))
    with pytest.raises(anthropic.APIStatusError):
        async with client.messages.stream(
            model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            await stream.get_final_message()


async def test_errors_have_anthropics_shape(
    client: anthropic.AsyncAnthropic, fake_anthropic: FakeAnthropic
) -> None:
    with pytest.raises(anthropic.NotFoundError) as missing:
        await client.messages.create(model="nope", max_tokens=8, messages=[{"role": "user", "content": "x"}])
    body: Any = missing.value.body
    assert body["type"] == "error" and body["error"]["type"] == "not_found_error"
    assert "`nope`" in body["error"]["message"]
    overloaded = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    fake_anthropic.queue(
        ErrorReply(
            429, overloaded, headers={"retry-after": "3", "anthropic-ratelimit-requests-remaining": "0"}
        )
    )
    with pytest.raises(anthropic.RateLimitError) as limited:
        await client.messages.create(
            model="claude-test", max_tokens=8, messages=[{"role": "user", "content": "x"}]
        )
    assert limited.value.body == overloaded
    assert limited.value.response.headers["retry-after"] == "3"
    assert limited.value.response.headers["anthropic-ratelimit-requests-remaining"] == "0"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_long_agent_conversation_is_compacted_with_pairs_and_signatures_intact(
    client: anthropic.AsyncAnthropic, fake_anthropic: FakeAnthropic, stream: bool
) -> None:
    history = agent_history(30)
    fake_anthropic.queue(MessageReply(text="INV-2093."))
    kwargs: Any = {
        "model": "claude-small",
        "max_tokens": 512,
        "system": "You are a coding agent.",
        "messages": _messages(history),
        "tools": [TOOL],
    }
    if stream:
        async with client.messages.stream(**kwargs) as events:
            final = await events.get_final_message()
    else:
        final = await client.messages.create(**kwargs)
    assert final.content[0].type == "text" and final.content[0].text == "INV-2093."
    sent = fake_anthropic.last_body
    canonical = [plain(m) for m in to_messages(sent)]
    assert pairing_violations(canonical) == []
    assert len(json.dumps(sent)) < len(json.dumps(history)) // 2  # compacted
    question = {"type": "text", "text": "Which repo are we in?"}  # consecutive user turns merged
    assert sent["messages"][-1] == {"role": "user", "content": [*history[-2]["content"], question]}
    kept = [
        b
        for m in sent["messages"]
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] == "thinking"
    ]
    assert kept and all(b["signature"].startswith("sig-") for b in kept)
    system = sent["system"]
    assert system[0] == {"type": "text", "text": "You are a coding agent."}
    assert system[-1]["cache_control"] == {"type": "ephemeral"} and len(system) > 1
    assert "INV-2093" in json.dumps(sent["system"]) + json.dumps(sent["messages"][:-1])


async def test_count_tokens_native_and_local(
    client: anthropic.AsyncAnthropic, fake_anthropic: FakeAnthropic
) -> None:
    native = await client.messages.count_tokens(
        model="claude-test", messages=[{"role": "user", "content": "x"}]
    )
    assert native.input_tokens == 4242 and fake_anthropic.last_body["model"] == "claude-sonnet-4-5"
    local = await client.messages.count_tokens(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}]
    )
    assert 0 < local.input_tokens < 20


@pytest.mark.parametrize("stream", [False, True])
async def test_other_entries_are_translated(
    client: anthropic.AsyncAnthropic, fake_upstream: FakeUpstream, stream: bool
) -> None:
    fake_upstream.queue(Reply(text="via chat", tool_calls=[tool_call("call_1", "read_file", {"path": "z"})]))
    kwargs: Any = {
        "model": "gpt-4o-mini",
        "max_tokens": 100,
        "system": "Be kind.",
        "tools": [TOOL],
        "stop_sequences": ["END"],
        "messages": [{"role": "user", "content": "hi"}],
    }
    if stream:
        async with client.messages.stream(**kwargs) as events:
            final = await events.get_final_message()
    else:
        final = await client.messages.create(**kwargs)
    assert [b.type for b in final.content] == ["text", "tool_use"] and final.stop_reason == "tool_use"
    assert final.content[1].type == "tool_use" and final.content[1].input == {"path": "z"}
    sent = fake_upstream.last_body
    assert sent["messages"] == [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "hi"}]
    assert sent["stop"] == ["END"] and sent["tools"][0]["function"]["name"] == "read_file"


def test_thinking_blocks_are_counted_in_the_budget() -> None:
    from compaction.tokens import TokenCounter
    from proxy.wire.anthropic import assistant_turn

    counter = TokenCounter.for_model("gpt-4o-mini")
    thinking = {"type": "thinking", "thinking": "step by step " * 200, "signature": "sig"}
    text = {"type": "text", "text": "done"}
    assert (
        counter.count_message(assistant_turn([thinking, text])[0])
        > counter.count_message(assistant_turn([text])[0]) + 300
    )


async def test_the_synchronous_client_works_too(server: TestServer, fake_anthropic: FakeAnthropic) -> None:
    import asyncio

    fake_anthropic.queue(MessageReply(text="sync create"), MessageReply(text="sync stream"))
    client = anthropic.Anthropic(base_url=str(server.make_url("")).rstrip("/"), api_key=TEST_API_KEY,
                                 max_retries=0)

    def talk() -> tuple[str, str]:
        created = client.messages.create(model="claude-test", max_tokens=16,
                                         messages=[{"role": "user", "content": "a"}])
        with client.messages.stream(model="claude-test", max_tokens=16,
                                    messages=[{"role": "user", "content": "b"}]) as stream:
            streamed = "".join(stream.text_stream)
        first = created.content[0]
        return (first.text if first.type == "text" else ""), streamed

    try:
        assert await asyncio.to_thread(talk) == ("sync create", "sync stream")
    finally:
        client.close()


async def test_a_resent_agent_history_is_parsed_past_what_it_shares(
    client: anthropic.AsyncAnthropic, fake_anthropic: FakeAnthropic, server: TestServer
) -> None:
    """proxy/server/resent_body.py on the Messages API: each resend reaches the provider as sent."""
    history = agent_history(60)[:-1]  # over resent_body.MIN_BYTES; ends with a tool result
    for turn in range(3):
        fake_anthropic.queue(MessageReply(text=f"answer {turn}"))
        await client.messages.create(model="claude-test", max_tokens=64, messages=_messages(history))
        assert fake_anthropic.last_body["messages"] == history
        history += [{"role": "assistant", "content": [{"type": "text", "text": f"answer {turn}"}]},
                    {"role": "user", "content": f"and step {turn + 1}?"}]
    async with aiohttp.ClientSession() as http:
        text = await (await http.get(server.make_url("/metrics"))).text()
    assert "ctxproxy_resent_body_parses_total 2.0" in text.splitlines()
