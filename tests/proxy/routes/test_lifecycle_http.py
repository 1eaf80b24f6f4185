"""DELETE /v1/context/conversations/{id} and /v1/context/tenant through the real app and engine,
with the openai SDK: the caller's own data only, and nothing left to find or read back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import openai
import pytest
from aiohttp.test_utils import TestServer

from proxy import appkeys
from tests.conftest import ProxyFactory
from tests.store.lifecycle_helpers import store_holds

ALICE, BOB = "sk-alice-0123456789abcdefghij", "sk-bob-0123456789abcdefghijkl"
MARKER = "Plover8Quince2Tarn"


@pytest.fixture
async def server(make_proxy: ProxyFactory) -> TestServer:
    return await make_proxy()


@pytest.fixture
async def clients(server: TestServer) -> AsyncIterator[dict[str, openai.AsyncOpenAI]]:
    url = str(server.make_url("/v1"))
    made = {name: openai.AsyncOpenAI(base_url=url, api_key=key, max_retries=0)
            for name, key in (("alice", ALICE), ("bob", BOB))}
    yield made
    for client in made.values():
        await client.close()


async def _chat(client: openai.AsyncOpenAI, text: str, conversation: str) -> str:
    """One turn; returns the proxy's conversation id for it."""
    raw = await client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": text}],
        extra_headers={"X-Conversation-Id": conversation})
    return raw.headers["X-Ctxproxy-Conversation-Id"]


async def _hits(client: openai.AsyncOpenAI, pattern: str) -> list[object]:
    reply = await client.post("/context/search", cast_to=object,
                              body={"pattern": pattern, "all_conversations": True})
    assert isinstance(reply, dict)
    data: list[object] = reply["data"]
    return data


def _db(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


async def test_delete_conversation_erases_it_for_its_owner_only(
        clients: dict[str, openai.AsyncOpenAI], tmp_path: Path) -> None:
    alice, bob = clients["alice"], clients["bob"]
    doomed = await _chat(alice, f"my locker code word is {MARKER}", "c1")
    kept = await _chat(alice, "tell me about kayaks", "c2")
    await _chat(bob, f"bob also says {MARKER}", "b1")
    with pytest.raises(openai.NotFoundError):
        await bob.delete(f"/context/conversations/{doomed}", cast_to=object)  # not bob's
    assert await _hits(alice, MARKER)
    reply = await alice.delete(f"/context/conversations/{doomed}", cast_to=object)
    assert reply == {"id": doomed, "object": "conversation.deleted", "deleted": True}
    assert await _hits(alice, MARKER) == []
    assert await _hits(alice, "kayaks")
    assert len(await _hits(bob, MARKER)) == 1
    with pytest.raises(openai.NotFoundError):
        await alice.delete(f"/context/conversations/{doomed}", cast_to=object)
    assert kept != doomed


async def test_delete_tenant_leaves_no_text_in_the_files(clients: dict[str, openai.AsyncOpenAI],
                                                         server: TestServer, tmp_path: Path) -> None:
    alice, bob = clients["alice"], clients["bob"]
    for i in range(3):
        await _chat(alice, f"note {i}: {MARKER}{i}", f"c{i}")
    await _chat(bob, "bob keeps Heron5Sedge", "b1")
    reply = await alice.delete("/context/tenant", cast_to=object)
    assert reply == {"object": "tenant.deleted", "deleted": True, "conversations_deleted": 3}
    assert await _hits(alice, MARKER) == []
    store = server.app[appkeys.STORE]  # SQLite: the files; PostgreSQL: the tables (store_holds)
    assert not store_holds(store, _db(tmp_path), MARKER)
    assert store_holds(store, _db(tmp_path), "Heron5Sedge")


async def test_keyless_callers_cannot_delete(server: TestServer) -> None:
    """The shared anonymous tenant is nobody's to erase: 401 in OpenAI's error shape."""
    async with aiohttp.ClientSession() as session, session.delete(
            server.make_url("/v1/context/tenant")) as resp:
        assert resp.status == 401
        assert (await resp.json())["error"]["code"] == "missing_api_key"
