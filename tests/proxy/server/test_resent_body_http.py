"""Held chat bodies through the HTTP interface (proxy/server/resent_body.py): an agent loop's large
resends are parsed past what they share with the previous body and still reach the provider and the
store exactly as sent; a body that does not resend a held one of the same tenant is parsed in full,
and a broken one is still a 400 in OpenAI's shape."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import orjson
from aiohttp.test_utils import TestServer
from openai import AsyncOpenAI

from compaction.types import Message
from proxy import appkeys
from proxy.server.resent_body import MIN_BYTES
from tests.conftest import TEST_API_KEY, ProxyFactory, settled
from tests.fakes.upstream import FakeUpstream, Reply

MODEL = "gpt-4o-mini"
OTHER_KEY = "sk-other-tenant-0123456789abcdefgh"
SYSTEM = {"role": "system", "content": "Follow the repository's conventions. " * (MIN_BYTES // 30)}


async def _metric(server: TestServer, name: str) -> float:
    async with aiohttp.ClientSession() as http:
        text = await (await http.get(server.make_url("/metrics"))).text()
    return float(next(line.split()[1] for line in text.splitlines() if line.startswith(name + " ")))


async def _post(server: TestServer, raw: bytes, key: str = TEST_API_KEY) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    async with aiohttp.ClientSession() as http, http.post(
            server.make_url("/v1/chat/completions"), data=raw, headers=headers) as resp:
        return resp.status, await resp.json()


async def test_an_agent_loop_is_parsed_past_its_resent_part_and_forwarded_as_sent(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream) -> None:
    server = await make_proxy()
    client = AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key=TEST_API_KEY, max_retries=0)
    history: list[Message] = [SYSTEM, {"role": "user", "content": "fix the build é😀"}]
    for turn in range(4):
        fake_upstream.queue(Reply(text=f"step {turn}: edited `a]}}.py`"))
        reply = await client.chat.completions.create(model=MODEL, messages=history)  # type: ignore[arg-type]
        assert fake_upstream.last_body["messages"] == history
        history += [{"role": "assistant", "content": reply.choices[0].message.content},
                    {"role": "user", "content": f"now step {turn + 1}"}]
    await client.close()
    await settled(server)
    assert await _metric(server, "ctxproxy_resent_body_parses_total") == 3  # all but the first
    store = server.app[appkeys.STORE]
    tenant = store.for_tenant(store.tenant_id_for_key(TEST_API_KEY))
    [conversation] = tenant.list_conversations()
    assert [m.message["content"] for m in tenant.messages(conversation.id)] == [
        h["content"] for h in history[:-1]]


async def test_only_a_resend_of_the_same_tenant_reuses_a_held_body(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream) -> None:
    server = await make_proxy()
    first = [SYSTEM, {"role": "user", "content": "one"}]
    fake_upstream.queue(Reply(text="a"), Reply(text="b"), Reply(text="c"))
    resend = orjson.dumps({"model": MODEL, "messages": [*first, {"role": "assistant", "content": "a"},
                                                        {"role": "user", "content": "two"}]})
    assert (await _post(server, orjson.dumps({"model": MODEL, "messages": first})))[0] == 200
    assert (await _post(server, resend, key=OTHER_KEY))[0] == 200
    assert await _metric(server, "ctxproxy_resent_body_parses_total") == 0
    assert (await _post(server, resend))[0] == 200
    assert fake_upstream.last_body["messages"] == orjson.loads(resend)["messages"]
    assert await _metric(server, "ctxproxy_resent_body_parses_total") == 1


async def test_a_broken_resend_is_a_400_and_changes_nothing(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream) -> None:
    server = await make_proxy()
    first = [SYSTEM, {"role": "user", "content": "one"}]
    fake_upstream.queue(Reply(text="a"))
    assert (await _post(server, orjson.dumps({"model": MODEL, "messages": first})))[0] == 200
    calls = len(fake_upstream.requests)
    broken = orjson.dumps({"model": MODEL, "messages": first})[:-2] + b',{"role": "user", "content": "tw}'
    status, error = await _post(server, broken)
    assert status == 400 and error["error"]["code"] == "invalid_json"
    assert len(fake_upstream.requests) == calls
    assert await _metric(server, "ctxproxy_resent_body_parses_total") == 0


async def test_a_resend_known_from_memory_is_forwarded_while_the_engine_thread_is_busy(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream) -> None:
    """The HTTP loop forwards an agent loop's resend itself (compaction/resend/early_forward.py): the
    provider has it while the engine thread is still blocked, and the client's answer waits for
    the request's bookkeeping (its messages and reply are stored before it is answered)."""
    server = await make_proxy()
    client = AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key=TEST_API_KEY, max_retries=0)
    history: list[Message] = [SYSTEM, {"role": "user", "content": "fix the build"}]
    for turn in range(2):
        reply = await client.chat.completions.create(model=MODEL, messages=history)  # type: ignore[arg-type]
        history += [{"role": "assistant", "content": reply.choices[0].message.content},
                    {"role": "user", "content": f"now step {turn + 1}"}]
    released = asyncio.Event()
    blocked = asyncio.create_task(server.app[appkeys.HOST].run(lambda: time.sleep(1.0)))
    answering = asyncio.create_task(client.chat.completions.create(model=MODEL, messages=history))  # type: ignore[arg-type]
    blocked.add_done_callback(lambda _: released.set())
    for _ in range(100):  # the provider gets the request within 0.5 s, the engine thread still blocked
        if len(fake_upstream.requests) == 3:
            break
        await asyncio.sleep(0.005)
    assert len(fake_upstream.requests) == 3 and not released.is_set()
    assert fake_upstream.last_body["messages"] == history
    assert not answering.done()  # the answer waits for the bookkeeping
    await answering
    assert released.is_set()
    await client.close()
    store = server.app[appkeys.STORE]
    tenant = store.for_tenant(store.tenant_id_for_key(TEST_API_KEY))
    [conversation] = tenant.list_conversations()
    assert len(tenant.messages(conversation.id)) == len(history) + 1  # and the reply
