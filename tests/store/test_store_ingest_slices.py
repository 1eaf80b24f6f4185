"""A long history stored in slices: one transaction per slice, the same result as one ingest.

The engine stores an imported session's history `size` new messages per transaction and lets other
conversations' work run between slices (compaction/engine.py `_ingest`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compaction.types import Message
from store.interface import StoreBackend, TenantAccess
from store.models import IngestResult, SearchQuery
from store.sqlite.store import Store
from tests.store.store_helpers import TokenCounter, history, scalar


def _drain(steps: Iterator[IngestResult | None]) -> tuple[IngestResult, int]:
    """The sliced ingest's result and how many pauses it offered."""
    pauses = 0
    for item in steps:
        if item is None:
            pauses += 1
        else:
            return item, pauses
    raise AssertionError("no result")


def _sliced(tenant: TenantAccess, msgs: list[Message], counter: TokenCounter,
            size: int = 4) -> Iterator[IngestResult | None]:
    return tenant.ingest_slices(msgs, model="m", external_id=None, count_tokens=counter, size=size)


@pytest.mark.parametrize("turns", [1, 5, 6])
def test_slices_store_what_one_ingest_stores(store: StoreBackend, alice: TenantAccess, bob: TenantAccess,
                                             counter: TokenCounter, turns: int) -> None:
    msgs = history(turns)  # 3, 11 and 13 messages: one slice, several, a last partial one
    msgs[1] = {**msgs[1], "pinned": True}
    sliced, pauses = _drain(_sliced(alice, msgs, counter))
    whole = bob.ingest(msgs, model="m", external_id=None, count_tokens=counter)
    assert pauses == (len(msgs) - 1) // 4
    assert sliced.new_count == whole.new_count == len(msgs) and not sliced.forked
    assert sliced.conversation.message_count == len(msgs)
    assert [(m.seq, m.chain_hash, m.content_hash, m.token_count) for m in sliced.messages] == \
        [(m.seq, m.chain_hash, m.content_hash, m.token_count) for m in whole.messages]
    # written in bulk (one statement call per slice), read back row for row as the result holds them
    assert alice.messages(sliced.conversation.id) == list(sliced.messages)
    assert [m.pinned for m in sliced.messages][:3] == [False, True, False]
    assert bob.messages(whole.conversation.id) == list(whole.messages)
    again = alice.ingest(msgs, model="m", external_id=None, count_tokens=counter)  # a resend: nothing new
    assert again.conversation.id == sliced.conversation.id and again.new_count == 0


def test_between_slices_the_stored_prefix_is_a_whole_conversation(alice: TenantAccess,
                                                                  counter: TokenCounter) -> None:
    msgs = history(6)
    steps = _sliced(alice, msgs, counter)
    assert next(steps) is None
    (partial,) = alice.list_conversations()
    assert partial.message_count == 4
    assert [m.seq for m in alice.messages(partial.id)] == [0, 1, 2, 3]
    result, _ = _drain(steps)
    assert result.conversation.id == partial.id and result.conversation.message_count == len(msgs)


def test_another_request_writing_between_slices_is_not_duplicated(
        store: StoreBackend, alice: TenantAccess, counter: TokenCounter) -> None:
    msgs = history(6)
    steps = _sliced(alice, msgs, counter)
    assert next(steps) is None  # 4 stored; a retry of the same request stores everything meanwhile
    retry = alice.ingest(msgs, model="m", external_id=None, count_tokens=counter)
    result, _ = _drain(steps)
    assert result.conversation.id == retry.conversation.id
    assert [m.id for m in result.messages] == [m.id for m in retry.messages]
    assert int(scalar(store, "SELECT COUNT(*) FROM messages")) == len(msgs)


def test_a_diverging_long_history_forks_in_slices(alice: TenantAccess, counter: TokenCounter) -> None:
    original = history(6)
    first = alice.ingest(original, model="m", external_id=None, count_tokens=counter)
    edited = [*original[:5], {"role": "user", "content": "an edited question"}, *history(4)[1:]]
    result, pauses = _drain(_sliced(alice, edited, counter))
    assert result.forked and result.conversation.id != first.conversation.id and pauses
    assert result.conversation.message_count == len(edited)
    assert alice.conversation(first.conversation.id).message_count == len(original)  # untouched


def _found(tenant: TenantAccess, pattern: str) -> set[int]:
    hits = tenant.search(SearchQuery(pattern, all_conversations=True))
    return {int(h.id) for h in hits if h.kind == "message"}


def test_a_bulk_import_is_searchable_once_indexed_and_one_slice_at_once(
        store: StoreBackend, alice: TenantAccess, bob: TenantAccess, counter: TokenCounter) -> None:
    bulk, _ = _drain(_sliced(alice, history(6, topic="ledgers"), counter))  # 13 messages in 4-message slices
    small, _ = _drain(_sliced(bob, history(1, topic="ledgers"), counter))  # one slice: not a bulk import
    assert _found(bob, "ledgers") == {m.id for m in small.messages if m.role != "system"}
    pending = scalar(store, "SELECT COUNT(*) FROM messages WHERE fts_pending = 1")
    assert pending == len(bulk.messages)
    if isinstance(store, Store):  # SQLite indexes after the request; PostgreSQL's trigger at insert
        assert _found(alice, "ledgers") == set()
    assert store.index_pending(5) == 5 and store.index_pending(100) == pending - 5
    assert store.index_pending(100) == 0
    assert _found(alice, "ledgers") == {m.id for m in bulk.messages if m.role != "system"}


def test_deleting_a_bulk_import_before_it_is_indexed_leaves_the_search_indexes_sound(
        store: StoreBackend, alice: TenantAccess, counter: TokenCounter) -> None:
    bulk, _ = _drain(_sliced(alice, history(6, topic="ledgers"), counter))
    store.index_pending(3)  # part indexed, part not
    alice.delete_conversation(bulk.conversation.id)
    assert store.index_pending(100) == 0 and _found(alice, "ledgers") == set()
    if isinstance(store, Store):
        for index in ("messages_fts", "messages_tri"):
            store.conn.execute(f"INSERT INTO {index} ({index}) VALUES ('integrity-check')")  # raises if not
