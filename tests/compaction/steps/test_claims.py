"""One compaction step per conversation at a time, across processes and within one (claims.py).

On a real SQLite store: a claim excludes every other step, a waiting step gets it once released and
gives up at its deadline without touching the other's claim. Through the engine: a request that must
compact while another replica holds the conversation waits until its deadline, then goes on with
the local levels only; one that finds its own engine's background step preparing waits for it and
uses what it prepared instead of sending the summarizer the same chunk again.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from compaction.deadline import Deadline
from compaction.steps.claims import StepClaims
from config.settings import StoreSettings
from store.sqlite.store import Store
from store.tenant import TenantStore
from tests.compaction.conftest import asst, user
from tests.compaction.test_engine import SMALL, history, make_engine, turn
from tests.fakes.summarizer import ScriptedSummarizer

HANG_GUARD_S = 60.0  # only so a regression fails instead of hanging; never a timing assertion
OTHER_REPLICA = "other-host:4242:cafe:1"


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = Store.open(StoreSettings(path=str(tmp_path / "claims.db"), tenant_secret="z" * 32))
    yield s
    s.close()


def _conversation(store: Store) -> tuple[TenantStore, str]:
    tenant = store.for_tenant("tenant-a")
    result = tenant.ingest(history(2), model="m", external_id=None, count_tokens=lambda m: 10)
    return tenant, result.conversation.id


def _holder(store: Store, cid: str) -> str | None:
    row = store.conn.execute("SELECT holder FROM step_leases WHERE conversation_id = ?", (cid,)).fetchone()
    return None if row is None else str(row[0])


async def test_a_claim_excludes_every_other_step_until_released(store: Store) -> None:
    tenant, cid = _conversation(store)
    claims = StepClaims("host:1:beef", lease_s=60)
    async with claims.attempt(tenant, cid) as first:
        async with claims.attempt(tenant, cid) as second:  # the same engine's next step
            assert first and not second
        assert _holder(store, cid) == "host:1:beef:1"  # the loser released nothing
    assert _holder(store, cid) is None
    async with claims.attempt(tenant, cid) as again:
        assert again


async def test_a_waiting_step_gets_the_claim_once_the_other_releases_it(store: Store) -> None:
    tenant, cid = _conversation(store)
    claims = StepClaims("host:1:beef", lease_s=60, poll_s=0.01)
    assert tenant.claim_step(cid, OTHER_REPLICA, 60)

    async def other_finishes() -> None:
        await asyncio.sleep(0.1)
        tenant.release_step(cid, OTHER_REPLICA)

    releasing = asyncio.create_task(other_finishes())
    async with claims.waiting(tenant, cid, Deadline.after(HANG_GUARD_S)) as claim:
        assert claim.held and claim.waited
        assert _holder(store, cid) == "host:1:beef:1"
    await releasing
    assert _holder(store, cid) is None


async def test_a_waiting_step_gives_up_at_its_deadline_and_leaves_the_other_claim(store: Store) -> None:
    tenant, cid = _conversation(store)
    claims = StepClaims("host:1:beef", lease_s=60, poll_s=0.01)
    assert tenant.claim_step(cid, OTHER_REPLICA, 60)
    async with claims.waiting(tenant, cid, Deadline.after(0.05)) as claim:
        assert not claim.held and claim.waited
    assert _holder(store, cid) == OTHER_REPLICA
    tenant.release_step(cid, OTHER_REPLICA)
    async with claims.waiting(tenant, cid, Deadline.after(HANG_GUARD_S)) as free:
        assert free.held and not free.waited


async def test_a_request_waits_for_another_replicas_step_then_uses_only_local_levels(store: Store) -> None:
    summarizer = ScriptedSummarizer("faithful")
    engine = make_engine(store, summarizer)
    settings = replace(SMALL, sync_deadline_s=0.5)
    msgs = history(70)
    tenant = store.for_tenant("tenant-a")
    try:
        first = await engine.prepare(turn(msgs[:3], settings=settings))  # the conversation exists
        assert tenant.claim_step(first.conversation_id, OTHER_REPLICA, 60)  # another replica steps
        prepared = await asyncio.wait_for(engine.prepare(turn(msgs, settings=settings)), HANG_GUARD_S)
    finally:
        await engine.aclose()
    assert prepared.tokens_forwarded <= prepared.budget and prepared.waited_on_summarizer
    assert summarizer.call_count == 0  # its deadline passed waiting: no LLM call raced the other's
    levels = {e.level for e in prepared.events if e.outcome == "committed"}
    assert levels and levels <= {"extractive", "elision"}
    assert _holder(store, first.conversation_id) == OTHER_REPLICA  # the other's claim untouched


async def test_a_request_waits_for_its_engines_background_step_and_uses_what_it_prepared(
        store: Store) -> None:
    summarizer = ScriptedSummarizer("slow", delay_s=0.2)
    engine = make_engine(store, summarizer)
    settings = replace(SMALL, sync_deadline_s=HANG_GUARD_S)
    msgs = history(48, words=40)
    try:
        first = await engine.prepare(turn(msgs, settings=settings))
        reply = asst("Your first order was ORD-1000.")
        engine.record_reply(first, turn(msgs, settings=settings), reply)
        assert engine.after_turn(first, turn(msgs, settings=settings))
        while summarizer.call_count == 0:  # the background step is preparing
            await asyncio.sleep(0)
        grown = [*msgs, reply, *[m for i in range(30) for m in (user(f"More {i}: " + "detail " * 40),
                                                                 asst(f"Noted {i}."))]]
        prepared = await asyncio.wait_for(engine.prepare(turn(grown, settings=settings)), HANG_GUARD_S)
        await engine.background.drain()
    finally:
        await engine.aclose()
    assert prepared.tokens_forwarded <= prepared.budget and prepared.summary_ids
    repeated = Counter(c.user_prompt for c in summarizer.calls)
    assert max(repeated.values()) == 1  # no chunk sent twice: the request waited for the step
