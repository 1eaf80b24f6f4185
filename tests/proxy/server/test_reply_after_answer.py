"""A non-streaming reply is stored before the client is answered, so before the conversation's next
request is prepared; a reply that cannot be stored is logged and counted, the answer stands."""

from __future__ import annotations

import io
import json

import aiohttp
from aiohttp.test_utils import TestServer
from openai import AsyncOpenAI

from compaction.types import ChatTurn, Message, PreparedRequest
from config.errors import StoreError
from proxy import appkeys
from tests.conftest import TEST_API_KEY, ProxyFactory, settled
from tests.fakes.upstream import FakeUpstream, Reply
from tests.proxy.passthrough_engine import PassthroughEngine

MODEL = "gpt-4o-mini"


class StoreFailingEngine(PassthroughEngine):
    """Storing the reply fails as a locked/corrupt store would."""

    def record_reply(self, prepared: PreparedRequest, turn: ChatTurn, message: Message) -> None:
        raise StoreError("database is locked")


def _client(server: TestServer) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key=TEST_API_KEY, max_retries=0)


async def test_the_reply_is_stored_before_the_next_request_is_prepared(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream) -> None:
    server = await make_proxy()
    client = _client(server)
    history: list[Message] = [{"role": "user", "content": "first question"}]
    for turn in range(3):
        fake_upstream.queue(Reply(text=f"answer {turn}"))
        reply = await client.chat.completions.create(model=MODEL, messages=history)  # type: ignore[arg-type]
        history += [{"role": "assistant", "content": reply.choices[0].message.content},
                    {"role": "user", "content": f"question {turn + 1}"}]
    await client.close()
    await settled(server)
    store = server.app[appkeys.STORE]
    tenant = store.for_tenant(store.tenant_id_for_key(TEST_API_KEY))
    [conversation] = tenant.list_conversations()
    stored = tenant.messages(conversation.id)
    # Each answer was stored as the provider's reply before the request resending it was ingested
    # (else the resent copy would have been stored, as the client's).
    assert [(m.role, m.source) for m in stored] == [("user", "client"), ("assistant", "reply")] * 3
    assert [m.message["content"] for m in stored[1::2]] == ["answer 0", "answer 1", "answer 2"]


async def test_a_reply_that_cannot_be_stored_leaves_the_answer_intact(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream) -> None:
    logs = io.StringIO()
    server = await make_proxy(engine_factory=lambda store, *_: StoreFailingEngine(store), log_stream=logs)
    fake_upstream.queue(Reply(text="hello there"))
    client = _client(server)
    reply = await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "go"}])
    await client.close()
    assert reply.choices[0].message.content == "hello there"
    await settled(server)
    lines = [json.loads(line) for line in logs.getvalue().splitlines()]
    failed = [e for e in lines if e["event"] == "reply_store_failed"]
    assert failed and failed[0]["error"] == "database is locked"
    (request,) = [e for e in lines if e["event"] == "request"]
    assert request["status"] == 200
    async with aiohttp.ClientSession() as http:
        metrics = await (await http.get(server.make_url("/metrics"))).text()
    assert "ctxproxy_reply_store_failures_total 1.0" in metrics.splitlines()
