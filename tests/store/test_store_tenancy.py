"""Tenant isolation: nothing of one tenant is visible to or writable by another, in any method."""

from __future__ import annotations

import pytest

from config.errors import NotFoundError
from store.models import (
    AnchorDraft,
    CompactionEvent,
    ContextView,
    ForwardedRecord,
    SearchQuery,
    SummaryDraft,
)
from store.sqlite.store import Store
from store.tenant import TenantStore
from tests.store.store_helpers import TokenCounter, history, scalar


@pytest.fixture
def alice_data(alice: TenantStore, counter: TokenCounter) -> dict[str, object]:
    result = alice.ingest(history(3, topic="secret-project"), model="m", external_id="shared-ext",
                          count_tokens=counter)
    cid = result.conversation.id
    ids = [m.id for m in result.messages]
    summary = alice.add_summary(SummaryDraft(cid, "leaf", 0, "normal", "secret-project summary", 3, 0, 2,
                                             tuple(ids[:3])))
    alice.upsert_anchors(cid, [AnchorDraft("id", "project", "X-1", ids[1], 1)])
    return {"cid": cid, "ids": ids, "summary": summary.id}


def test_same_history_is_two_conversations(alice: TenantStore, bob: TenantStore, counter: TokenCounter,
                                           alice_data: dict[str, object]) -> None:
    for external_id in (None, "shared-ext"):
        mine = bob.ingest(history(3, topic="secret-project"), model="m", external_id=external_id,
                          count_tokens=counter)
        assert mine.conversation.id != alice_data["cid"] and not mine.forked
        assert mine.conversation.forked_from is None
        assert mine.conversation.tenant_id == bob.tenant_id


def test_reads_of_other_tenant_raise_not_found(bob: TenantStore, alice_data: dict[str, object]) -> None:
    cid = str(alice_data["cid"])
    ids = alice_data["ids"]
    assert isinstance(ids, list)
    for call in (lambda: bob.conversation(cid), lambda: bob.messages(cid), lambda: bob.message(ids[0]),
                 lambda: bob.summary(str(alice_data["summary"])), lambda: bob.summaries(cid),
                 lambda: bob.view(cid), lambda: bob.anchors(cid), lambda: bob.events(cid),
                 lambda: bob.forwarded(cid), lambda: bob.tool_rounds(cid),
                 lambda: bob.expand([str(ids[0])]), lambda: bob.expand([str(alice_data["summary"])]),
                 lambda: bob.search(SearchQuery("secret", conversation_id=cid))):
        with pytest.raises(NotFoundError):
            call()
    assert bob.list_conversations() == []
    assert bob.search(SearchQuery("secret", all_conversations=True)) == []
    assert bob.search(SearchQuery("%ecret-proj%", all_conversations=True)) == []


def test_writes_into_other_tenant_raise_not_found(store: Store, bob: TenantStore,
                                                  alice_data: dict[str, object]) -> None:
    cid = str(alice_data["cid"])
    ids = alice_data["ids"]
    assert isinstance(ids, list)
    before = {t: scalar(store, f"SELECT COUNT(*) FROM {t}")
              for t in ("messages", "summaries", "anchors", "views", "compaction_events", "forwarded",
                        "tool_rounds", "conversations")}
    writes = (
        lambda: bob.append_reply(cid, {"role": "assistant", "content": "x"}, 1, parent_seq=0),
        lambda: bob.add_summary(SummaryDraft(cid, "leaf", 0, "normal", "x", 1, 0, 0, (ids[0],))),
        lambda: bob.save_view(ContextView(cid, 0, (), 0)),
        lambda: bob.upsert_anchors(cid, [AnchorDraft("id", "project", "X-2", None)]),
        lambda: bob.record_event(CompactionEvent(cid, "manual", "leaf", "normal", "committed", "m")),
        lambda: bob.record_forwarded(ForwardedRecord(cid, ("a",), 1, 1, 1, {}, False, 0)),
        lambda: bob.record_tool_round(cid, [], []),
        lambda: bob.delete_conversation(cid),
    )
    for call in writes:
        with pytest.raises(NotFoundError):
            call()
    after = {t: scalar(store, f"SELECT COUNT(*) FROM {t}") for t in before}
    assert after == before


def test_bob_cannot_cite_alice_messages_as_sources(bob: TenantStore, counter: TokenCounter,
                                                   alice_data: dict[str, object]) -> None:
    own = bob.ingest(history(1, topic="bob"), model="m", external_id=None, count_tokens=counter)
    ids = alice_data["ids"]
    assert isinstance(ids, list)
    with pytest.raises(NotFoundError):
        bob.add_summary(SummaryDraft(own.conversation.id, "leaf", 0, "normal", "x", 1, 0, 0, (ids[0],)))
    with pytest.raises(NotFoundError):
        bob.add_summary(SummaryDraft(own.conversation.id, "condensed", 1, "normal", "x", 1, 0, 0,
                                     source_summary_ids=(str(alice_data["summary"]),)))


def test_query_without_tenant_filter_is_refused(alice: TenantStore) -> None:
    from config.errors import StoreError

    with pytest.raises(StoreError):
        alice._run("SELECT * FROM messages")
