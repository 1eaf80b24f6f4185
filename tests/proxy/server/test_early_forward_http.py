"""Early forwarding through the HTTP interface (compaction/resend/early_forward.py): an agent loop's resends
reach the provider exactly as sent, from the second request on before their bookkeeping, streamed or
not; every message and reply is stored; a bookkeeping failure after the hand-over leaves the answer
intact and is logged."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import aiohttp
import structlog.testing
from aiohttp.test_utils import TestServer
from openai import AsyncOpenAI, AsyncStream

from compaction.engine import EarlyStart
from compaction.resend.early_forward import EarlyForward
from compaction.types import ChatTurn, Message, PreparedRequest
from config.errors import StoreError
from proxy import appkeys
from tests.conftest import TEST_API_KEY, ProxyFactory, settled
from tests.fakes.upstream import FakeUpstream, Reply
from tests.proxy.passthrough_engine import PassthroughEngine

MODEL = "gpt-4o-mini"


async def _metric(server: TestServer, name: str) -> float:
    async with aiohttp.ClientSession() as http:
        text = await (await http.get(server.make_url("/metrics"))).text()
    return float(next(line.split()[1] for line in text.splitlines() if line.startswith(name + " ")))


async def _ask(client: AsyncOpenAI, history: list[Message], stream: bool) -> tuple[str, str]:
    """The answer's text and the conversation id header of one request."""
    if not stream:
        raw = await client.chat.completions.with_raw_response.create(model=MODEL, messages=history)  # type: ignore[arg-type]
        return raw.parse().choices[0].message.content or "", raw.headers["X-Ctxproxy-Conversation-Id"]
    async with client.chat.completions.with_streaming_response.create(
            model=MODEL, messages=history, stream=True) as response:  # type: ignore[arg-type]
        chunks = await response.parse()
        assert isinstance(chunks, AsyncStream)
        parts = [chunk.choices[0].delta.content or "" async for chunk in chunks if chunk.choices]
        return "".join(parts), response.headers["X-Ctxproxy-Conversation-Id"]


async def test_an_agent_loop_reaches_the_provider_as_sent_and_is_stored(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream) -> None:
    server = await make_proxy()
    client = AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key=TEST_API_KEY, max_retries=0)
    history: list[Message] = [{"role": "system", "content": "be brief"},
                                     {"role": "user", "content": "question 0"}]
    conversation_ids = set()
    for turn in range(5):
        fake_upstream.queue(Reply(text=f"answer {turn}"))
        answer, conversation_id = await _ask(client, history, stream=turn % 2 == 1)
        assert fake_upstream.last_body["messages"] == history
        conversation_ids.add(conversation_id)
        history += [{"role": "assistant", "content": answer},
                    {"role": "user", "content": f"question {turn + 1}"}]
    await client.close()
    await settled(server)
    assert await _metric(server, "ctxproxy_early_forwards_total") == 4  # all but the first
    assert await _metric(server, "ctxproxy_early_forward_mismatches_total") == 0
    store = server.app[appkeys.STORE]
    tenant = store.for_tenant(store.tenant_id_for_key(TEST_API_KEY))
    [conversation] = tenant.list_conversations()
    assert conversation_ids == {conversation.id}
    stored = tenant.messages(conversation.id)
    # Every message but the last question (the next request's), the answers as the provider's replies.
    sent = [(h["role"], h["content"]) for h in history[:-1]]
    assert [(m.role, m.message["content"]) for m in stored] == sent
    assert [m.source for m in stored[2::2]] == ["reply"] * 5


class FailsAfterHandOver(PassthroughEngine):
    """Hands the request over early, then its bookkeeping fails (a full disk, say)."""

    async def prepare(self, turn: ChatTurn, early: EarlyForward | None = None,
                      start: EarlyStart | None = None) -> PreparedRequest:
        prepared = await super().prepare(turn)
        if early is None:
            return prepared
        await early(replace(prepared, last_seq=None, last_chain_hash=None))
        raise StoreError("database or disk is full")


async def test_a_failure_after_the_hand_over_leaves_the_answer_intact(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream) -> None:
    logs = io.StringIO()
    server = await make_proxy(engine_factory=lambda store, *_: FailsAfterHandOver(store), log_stream=logs)
    fake_upstream.queue(Reply(text="still answered"))
    client = AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key=TEST_API_KEY, max_retries=0)
    with structlog.testing.capture_logs() as engine_logs:  # the engine thread's own log lines
        reply = await client.chat.completions.create(model=MODEL,
                                                     messages=[{"role": "user", "content": "go"}])
        await settled(server)
    await client.close()
    assert reply.choices[0].message.content == "still answered"
    assert [e["error"] for e in engine_logs if e["event"] == "early_forward_settle_failed"] == ["StoreError"]
    lines = [json.loads(line) for line in logs.getvalue().splitlines()]
    assert [e["error"] for e in lines if e["event"] == "reply_store_failed"] == ["database or disk is full"]
    assert await _metric(server, "ctxproxy_reply_store_failures_total") == 1
    assert await _metric(server, "ctxproxy_early_forwards_total") == 1
