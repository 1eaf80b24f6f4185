"""SIGKILL under load loses nothing acknowledged: the real server as a subprocess, concurrent turns
through the openai SDK, a kill mid-traffic, a restart, and every 200-answered turn in the store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import openai
import pytest

from config.settings import StoreSettings
from store.sqlite.store import Store
from tests.e2e.server_process import ServerProcess, free_port, write_config
from tests.fakes.upstream import FakeUpstream, Reply

KEY = "sk-durability-0123456789abcdef"
CLIENTS = 6
ACKS_BEFORE_KILL = 60
JSON = dict[str, object]


@pytest.fixture
async def upstream() -> AsyncIterator[FakeUpstream]:
    fake = await FakeUpstream().start()
    fake.responder = lambda body: Reply(text="reply to " + str(body["messages"][-1]["content"]))
    try:
        yield fake
    finally:
        await fake.close()


async def _client_loop(client: openai.AsyncOpenAI, name: str, acked: list[tuple[str, str]],
                       sent: list[str], enough: asyncio.Event) -> None:
    """Turn after turn of one conversation until the server dies; records each turn sent and each
    acknowledged one."""
    history: list[JSON] = [{"role": "system", "content": f"conversation {name}"}]
    turn = 0
    while True:
        text = f"turn {turn} of {name}"
        sent.append(text)
        try:
            reply = await client.chat.completions.create(
                model="gpt-4o-mini", messages=[*history, {"role": "user", "content": text}],  # type: ignore[list-item]
                extra_headers={"X-Conversation-Id": name})
        except openai.APIError:
            return  # the server is gone
        answer = str(reply.choices[0].message.content)
        acked.append((text, answer))
        history += [{"role": "user", "content": text}, {"role": "assistant", "content": answer}]
        turn += 1
        if len(acked) >= ACKS_BEFORE_KILL:
            enough.set()


def _stored_texts(db: Path) -> set[str]:
    store = Store.open(StoreSettings(path=str(db)))
    try:
        tenant = store.for_tenant(store.tenant_id_for_key(KEY))
        return {str(m.message.get("content")) for c in tenant.list_conversations(limit=1000)
                for m in tenant.messages(c.id)}
    finally:
        store.close()


async def test_sigkill_under_load_keeps_every_acknowledged_turn(upstream: FakeUpstream,
                                                                tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    config = write_config(tmp_path / "ctxproxy.yaml", upstream.url, db)
    server = await ServerProcess(config, free_port()).start()
    acked: list[tuple[str, str]] = []
    sent: list[str] = []
    enough = asyncio.Event()
    client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=60.0)
    try:
        loops = [asyncio.create_task(_client_loop(client, f"c{i}", acked, sent, enough))
                 for i in range(CLIENTS)]
        await enough.wait()
        in_flight = len(sent) - len(acked)
        server.kill()  # while the other clients' requests are in flight
        await asyncio.gather(*loops)
    finally:
        server.stop()
        await client.close()
    assert len(acked) >= ACKS_BEFORE_KILL
    restarted = await ServerProcess(config, free_port()).start()
    try:
        async with openai.AsyncOpenAI(base_url=restarted.url + "/v1", api_key=KEY, max_retries=0) as again:
            after = await again.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "after the crash"}])
        assert after.choices[0].message.content == "reply to after the crash"
        stored = _stored_texts(db)
    finally:
        restarted.stop()
    assert in_flight >= 1  # the kill did cut requests in flight
    missing = [pair for pair in acked if not set(pair) <= stored]
    assert missing == []
    assert "after the crash" in stored
