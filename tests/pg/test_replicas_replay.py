"""The e2e replay on two replicas sharing PostgreSQL: the generated agent conversation (tool rounds,
planted facts, a corrected budget) alternates turn by turn between two real server processes and
holds what it holds on one SQLite process (tests/e2e/test_replay.py): every forwarded request within
the budget with its tool pairs intact, the planted facts and the corrected value in the final
context, one stored copy of every message, and each chunk sent to the summarizer once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest

from compaction.toolpairs import pairing_violations
from compaction.types import Message
from config.settings import StoreSettings
from store.postgres.store import PgStore
from tests.e2e.conversation import Conversation, generate
from tests.e2e.harness import (
    MODEL,
    CachedCounter,
    Replay,
    budget_for,
    request_tokens,
    summarizer_responder,
)
from tests.e2e.test_replay import assert_facts_kept
from tests.fakes.upstream import FakeUpstream, Reply
from tests.pg.replicas import (
    Replica,
    check_each_prompt_summarized_once,
    check_one_clean_conversation,
    start_replica,
    wait_ready,
    write_config,
)
from tests.sdk_params import sdk_messages, sdk_tools

KEY = "sk-replica-replay-0123456789abcdef"
WINDOW = 12_000
TURNS = 150


@pytest.fixture
async def replicas(pg_url: str, tmp_path: Path, fake_upstream: FakeUpstream
                   ) -> AsyncIterator[tuple[Replica, Replica, FakeUpstream]]:
    summarizer = await FakeUpstream().start()
    summarizer.responder = summarizer_responder("faithful")
    config = write_config(tmp_path / "replay.yaml", fake_upstream.url, summarizer.url, window=WINDOW)
    a = start_replica(config, {"CTXPROXY_STORE__URL": pg_url})
    b = start_replica(config, {"CTXPROXY_STORE__URL": pg_url})
    try:
        await asyncio.gather(wait_ready(a), wait_ready(b))
        yield a, b, summarizer
    finally:
        a.stop()
        b.stop()
        await summarizer.close()


async def _replay_alternating(a: Replica, b: Replica, model: FakeUpstream, conv: Conversation
                              ) -> list[dict[str, Any]]:
    """Each turn on the other replica, the client resending its whole history, as an agent does."""
    clients = [openai.AsyncOpenAI(base_url=r.base_url + "/v1", api_key=KEY, max_retries=0, timeout=120)
               for r in (a, b)]
    history: list[Message] = [conv.system]
    try:
        for i, step in enumerate(conv.steps[:TURNS]):
            history += [dict(m) for m in step.client]
            model.queue(Reply(text=step.reply_text, tool_calls=list(step.reply_calls)))
            response = await clients[i % 2].chat.completions.create(
                model=MODEL, messages=sdk_messages(history), tools=sdk_tools(conv.tools))
            history.append(response.choices[0].message.model_dump(exclude_none=True))
    finally:
        for client in clients:
            await client.close()
    return history


async def test_the_e2e_replay_alternating_between_two_replicas_holds(
        replicas: tuple[Replica, Replica, FakeUpstream], fake_upstream: FakeUpstream, pg_url: str) -> None:
    a, b, summarizer = replicas
    conv = generate(turns=TURNS, seed=7)
    history = await _replay_alternating(a, b, fake_upstream, conv)
    counter, budget = CachedCounter(MODEL), budget_for(WINDOW)
    forwarded = [r.body for r in fake_upstream.requests]
    assert len(forwarded) == TURNS
    over = [i for i, body in enumerate(forwarded) if request_tokens(counter, body) > budget]
    assert over == [], f"requests over the {budget}-token budget: {over}"
    assert [i for i, body in enumerate(forwarded) if pairing_violations(body["messages"])] == []
    final = forwarded[-1]["messages"]
    assert len(final) < len(history) - 1, "the final request was compacted"
    assert_facts_kept(Replay(forwarded=forwarded), conv)
    store = PgStore.open(StoreSettings(url=pg_url))
    try:
        check_one_clean_conversation(store, KEY, len(history))
    finally:
        store.close()
    check_each_prompt_summarized_once(summarizer)

