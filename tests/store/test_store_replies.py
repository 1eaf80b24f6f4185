"""Replies land after the request they answer: regenerated and concurrent replies never mix branches."""

from __future__ import annotations

from typing import Any

import pytest

from compaction.types import Message
from config.errors import StoreError
from store.encoding.identity import chain_hashes
from store.models import SearchQuery
from store.sqlite.store import Store
from store.tenant import TenantStore
from tests.store.store_helpers import TokenCounter, scalar

HI: dict[str, Any] = {"role": "user", "content": "hi"}
A: dict[str, Any] = {"role": "assistant", "content": "reply A"}
B: dict[str, Any] = {"role": "assistant", "content": "reply B"}
NEXT: dict[str, Any] = {"role": "user", "content": "next"}


def _bodies(tenant: TenantStore, cid: str) -> list[dict[str, Any]]:
    return [m.message for m in tenant.messages(cid)]


def _send(tenant: TenantStore, msgs: list[Message], counter: TokenCounter,
          external_id: str | None = None) -> tuple[str, int, str]:
    """Ingest a request; (conversation id, last seq, last chain hash) as the engine would keep them."""
    result = tenant.ingest(msgs, model="m", external_id=external_id, count_tokens=counter)
    last = result.messages[-1]
    return result.conversation.id, last.seq, last.chain_hash


@pytest.mark.parametrize("external_id", [None, "thread-7"])
def test_regenerated_reply_branches_and_next_resend_follows_it(
        alice: TenantStore, counter: TokenCounter, external_id: str | None) -> None:
    cid, seq, chain = _send(alice, [HI], counter, external_id)
    alice.append_reply(cid, A, 3, parent_seq=seq, parent_chain=chain)
    again = _send(alice, [HI], counter, external_id)  # the client regenerates the reply
    assert again[0] == cid and again[1] == 0
    b = alice.append_reply(cid, B, 3, parent_seq=again[1], parent_chain=again[2])
    assert _bodies(alice, cid) == [HI, A]  # the old branch is untouched: never [hi, A, B]
    assert b.conversation_id != cid and b.seq == 1 and b.source == "reply"
    fork = alice.conversation(b.conversation_id)
    assert fork.forked_from == cid and fork.message_count == 2 and fork.external_id == external_id
    assert _bodies(alice, fork.id) == [HI, B]
    assert [m.chain_hash for m in alice.messages(fork.id)] == chain_hashes([HI, B])
    nxt = alice.ingest([HI, B, NEXT], model="m", external_id=external_id, count_tokens=counter)
    assert nxt.conversation.id == fork.id and nxt.new_count == 1 and not nxt.forked
    assert _bodies(alice, fork.id) == [HI, B, NEXT]


def test_old_branch_still_matches_its_own_history(alice: TenantStore, counter: TokenCounter) -> None:
    cid, seq, chain = _send(alice, [HI], counter)
    alice.append_reply(cid, A, 3, parent_seq=seq, parent_chain=chain)
    fork = alice.append_reply(cid, B, 3, parent_seq=seq, parent_chain=chain).conversation_id
    old = alice.ingest([HI, A, NEXT], model="m", external_id=None, count_tokens=counter)
    assert old.conversation.id == cid and old.new_count == 1 and not old.forked
    assert _bodies(alice, cid) == [HI, A, NEXT] and _bodies(alice, fork) == [HI, B]


def test_two_replies_to_the_same_prefix(alice: TenantStore, counter: TokenCounter) -> None:
    first = _send(alice, [HI], counter)
    second = _send(alice, [HI], counter)  # two identical requests in flight at once
    assert first == second
    a = alice.append_reply(first[0], A, 3, parent_seq=first[1], parent_chain=first[2])
    b = alice.append_reply(second[0], B, 3, parent_seq=second[1], parent_chain=second[2])
    assert a.conversation_id == first[0] and b.conversation_id != first[0]
    assert _bodies(alice, a.conversation_id) == [HI, A] and _bodies(alice, b.conversation_id) == [HI, B]
    assert alice.conversation(first[0]).message_count == 2


def test_identical_reply_twice_is_stored_once(store: Store, alice: TenantStore,
                                              counter: TokenCounter) -> None:
    cid, seq, chain = _send(alice, [HI], counter)
    a1 = alice.append_reply(cid, A, 3, parent_seq=seq, parent_chain=chain)
    a2 = alice.append_reply(cid, {**A, "refusal": None}, 3, parent_seq=seq, parent_chain=chain)
    assert a2.id == a1.id and a2.conversation_id == cid
    assert alice.conversation(cid).message_count == 2
    assert scalar(store, "SELECT COUNT(*) FROM conversations") == 1


def test_reply_to_an_unknown_parent_is_refused(alice: TenantStore, counter: TokenCounter) -> None:
    cid, seq, chain = _send(alice, [HI], counter)
    with pytest.raises(StoreError):
        alice.append_reply(cid, A, 3, parent_seq=seq + 1)
    with pytest.raises(StoreError):
        alice.append_reply(cid, A, 3, parent_seq=seq, parent_chain="0" * 64)
    assert _bodies(alice, cid) == [HI]


def test_forked_reply_copies_are_searchable(alice: TenantStore, counter: TokenCounter) -> None:
    cid, seq, chain = _send(alice, [{"role": "user", "content": "tell me about zebras"}], counter)
    alice.append_reply(cid, A, 3, parent_seq=seq, parent_chain=chain)
    fork = alice.append_reply(cid, B, 3, parent_seq=seq, parent_chain=chain).conversation_id
    hits = alice.search(SearchQuery("zebras", scope="message", conversation_id=fork))
    assert [h.conversation_id for h in hits] == [fork]
