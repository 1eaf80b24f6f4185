"""Two real server processes sharing one PostgreSQL store cooperate on the same conversations.

One conversation's turns alternate between the replicas, then a burst of concurrent identical turns
hits both, then one replica is SIGKILLed while its background compaction step waits on the
summarizer and the other takes the step over once the lease expires. After each: one conversation,
every message once, no summary stored twice, a view whose summaries never cover a message twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from compaction.types import Message
from config.settings import StoreSettings
from store.postgres.store import PgStore
from tests.e2e.harness import summarizer_responder
from tests.fakes.upstream import FakeUpstream
from tests.pg.replicas import (
    MODEL,
    Replica,
    check_each_prompt_summarized_once,
    check_one_clean_conversation,
    start_replica,
    wait_ready,
    write_config,
)

LEASE_S = 2
FILLER = " ".join(f"word{i % 97} detail{i % 13}" for i in range(120))  # ~300 tokens a turn


@dataclass
class Pair:
    a: Replica
    b: Replica
    summarizer: FakeUpstream
    store: PgStore


@pytest.fixture
async def pair(pg_url: str, tmp_path: Path, fake_upstream: FakeUpstream) -> AsyncIterator[Pair]:
    summarizer = await FakeUpstream().start()
    summarizer.responder = summarizer_responder("faithful")
    config = write_config(tmp_path / "replica.yaml", fake_upstream.url, summarizer.url)
    env = {"CTXPROXY_STORE__URL": pg_url, "CTXPROXY_STORE__LEASE_S": str(LEASE_S)}
    a = start_replica(config, env)
    b = start_replica(config, env)
    store = PgStore.open(StoreSettings(url=pg_url))
    try:
        await asyncio.gather(wait_ready(a), wait_ready(b))
        yield Pair(a, b, summarizer, store)
    finally:
        a.stop()
        b.stop()
        store.close()
        await summarizer.close()


def _client(replica: Replica, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=replica.base_url + "/v1", api_key=key, max_retries=0, timeout=120)


async def _turn(replica: Replica, key: str, history: list[Message], i: int) -> None:
    """One user turn on `replica`; the history grows by the user message and the reply."""
    history.append({"role": "user", "content": f"turn {i}: {FILLER}"})
    async with _client(replica, key) as client:
        reply = await client.chat.completions.create(model=MODEL, messages=history)  # type: ignore[arg-type]
    history.append({"role": "assistant", "content": reply.choices[0].message.content})


async def _settle(store: PgStore, key: str) -> None:
    """Wait until no background step holds a lease for the tenant (both replicas idle)."""
    tenant_id = store.tenant_id_for_key(key)
    for _ in range(300):
        row = store.db.execute("SELECT COUNT(*) FROM step_leases WHERE tenant_id = :t", {"t": tenant_id})
        if row.fetchall()[0][0] == 0:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("a background step never finished")


async def _alternate(pair: Pair, key: str) -> list[dict[str, Any]]:
    history: list[Message] = [{"role": "system", "content": "You are terse."}]
    for i in range(24):
        await _turn(pair.a if i % 2 == 0 else pair.b, key, history, i)
    await _settle(pair.store, key)
    summaries = check_one_clean_conversation(pair.store, key, len(history))
    assert summaries, "the alternating conversation crossed the threshold: someone compacted it"
    check_each_prompt_summarized_once(pair.summarizer)
    return history


async def _recall_across(pair: Pair, key: str) -> None:
    """What replica A stored, replica B finds (search) and A expands back, for the same client key."""
    auth = {"Authorization": f"Bearer {key}"}
    async with aiohttp.ClientSession(headers=auth) as http:
        async with http.post(pair.b.base_url + "/v1/context/search",
                             json={"pattern": '"turn 0"', "scope": "message"}) as resp:
            assert resp.status == 200
            hits = (await resp.json())["data"]
        assert [h["role"] for h in hits] == ["user"]
        async with http.post(pair.a.base_url + "/v1/context/expand", json={"ids": [hits[0]["id"]]}) as resp:
            assert resp.status == 200
            items = (await resp.json())["data"]
    assert items[0]["text"].startswith("turn 0: word0")


async def _burst(pair: Pair, key: str, history: list[Message]) -> None:
    """Eight copies of the next turn at once, half on each replica: all answered, stored once."""
    history.append({"role": "user", "content": f"burst: {FILLER}"})
    replicas = [pair.a, pair.b] * 4

    async def send(replica: Replica) -> str | None:
        async with _client(replica, key) as client:
            reply = await client.chat.completions.create(model=MODEL, messages=history)  # type: ignore[arg-type]
        return reply.choices[0].message.content

    answers = await asyncio.gather(*(send(r) for r in replicas))
    assert len(answers) == 8 and set(answers) == {"ok"}
    history.append({"role": "assistant", "content": "ok"})
    await _settle(pair.store, key)
    check_one_clean_conversation(pair.store, key, len(history))
    check_each_prompt_summarized_once(pair.summarizer)


async def test_two_replicas_share_one_conversation(pair: Pair) -> None:
    history = await _alternate(pair, "sk-replica-alternating-0123456789")
    await _recall_across(pair, "sk-replica-alternating-0123456789")
    await _burst(pair, "sk-replica-alternating-0123456789", history)


async def test_a_replica_killed_mid_step_leaves_nothing_and_the_other_takes_over(pair: Pair) -> None:
    key = "sk-replica-killed-0123456789abcd"
    pair.summarizer.responder = summarizer_responder("slow", delay_s=8.0)
    history: list[Message] = [{"role": "system", "content": "You are terse."}]
    i = 0
    while not pair.summarizer.requests:  # turns on A until its background step calls the summarizer
        assert i < 40, "replica A never started a background step"
        await _turn(pair.a, key, history, i)
        i += 1
        await asyncio.sleep(0.3)
    tenant = pair.store.for_tenant(pair.store.tenant_id_for_key(key))
    cid = tenant.list_conversations()[0].id
    holder = pair.store.db.execute("SELECT holder FROM step_leases WHERE conversation_id = :c",
                                   {"c": cid}).fetchall()
    assert holder and f":{pair.a.proc.pid}:" in holder[0][0]  # A holds the step
    pair.a.kill()
    assert tenant.summaries(cid) == [] and tenant.events(cid) == []  # nothing half-done
    pair.summarizer.responder = summarizer_responder("faithful")
    await asyncio.sleep(LEASE_S + 0.5)  # A's lease runs out (A cannot release it)
    for j in range(i, i + 6):
        await _turn(pair.b, key, history, j)
    await _settle(pair.store, key)
    summaries = check_one_clean_conversation(pair.store, key, len(history))
    assert summaries and all(e.outcome != "failed" for e in tenant.events(cid))
