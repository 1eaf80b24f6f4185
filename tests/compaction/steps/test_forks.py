"""A forked conversation reuses its parent's summaries for the history they share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compaction.steps.forks import adopt_parent_summaries, shared_prefix
from config.settings import StoreSettings
from store.sqlite.store import Store
from tests.compaction.conftest import user
from tests.compaction.test_engine import history, make_engine, turn
from tests.fakes.summarizer import ScriptedSummarizer


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(StoreSettings(path=str(tmp_path / "forks.db"), tenant_secret="f" * 32))
    yield s
    s.close()


async def test_a_fork_substitutes_its_parents_summaries_without_summarizing(store: Store) -> None:
    summarizer = ScriptedSummarizer("faithful")
    engine = make_engine(store, summarizer)
    msgs = history(70)
    parent = await engine.prepare(turn(msgs))
    tenant = store.for_tenant("tenant-a")
    parent_summaries = tenant.summaries(parent.conversation_id)
    assert parent.summary_ids and parent_summaries and summarizer.call_count >= 1
    calls = summarizer.call_count
    edited = [*msgs[:-1], user("Actually: what was my second order?")]  # an edited last question
    fork = await engine.prepare(turn(edited))
    assert fork.conversation_id != parent.conversation_id
    assert tenant.conversation(fork.conversation_id).forked_from == parent.conversation_id
    assert summarizer.call_count == calls and not fork.waited_on_summarizer  # nothing summarized again
    assert fork.summary_ids and fork.tokens_forwarded <= fork.budget
    assert fork.messages[-1] == edited[-1]
    copies = tenant.summaries(fork.conversation_id)
    assert len(copies) == len(parent_summaries)
    fork_ids = {m.id for m in tenant.messages(fork.conversation_id)}
    assert all(set(s.source_message_ids) <= fork_ids for s in copies)  # mapped to the fork's messages
    assert {s.content for s in copies} == {s.content for s in parent_summaries}
    await engine.aclose()


async def test_only_the_shared_prefix_is_adopted_and_never_a_protected_message(store: Store) -> None:
    engine = make_engine(store, ScriptedSummarizer("faithful"))
    msgs = history(70)
    parent = await engine.prepare(turn(msgs))
    await engine.aclose()
    tenant = store.for_tenant("tenant-a")
    parent_messages = tenant.messages(parent.conversation_id)
    cut = 40  # the fork edits message 40: summaries reaching past it are not true for the fork
    edited = [*msgs[:cut], user("A different question entirely."), *msgs[cut + 1:]]
    ingest = tenant.ingest(edited, model="gpt-4o-mini", external_id=None, count_tokens=lambda _m: 10)
    assert ingest.forked and shared_prefix(parent_messages, ingest.messages) == cut
    adopted = adopt_parent_summaries(tenant, ingest)
    copies = tenant.summaries(ingest.conversation.id)
    assert adopted == len(copies) >= 1
    assert all(s.last_seq < cut for s in copies)
    expected = [s for s in tenant.summaries(parent.conversation_id) if s.last_seq < cut]
    assert {(s.first_seq, s.last_seq, s.content) for s in copies} == {
        (s.first_seq, s.last_seq, s.content) for s in expected}
    anchors = tenant.anchors(ingest.conversation.id)
    seqs = {m.id: m.seq for m in ingest.messages}
    assert anchors and all(seqs[a.source_message_id] < cut for a in anchors if a.source_message_id)
