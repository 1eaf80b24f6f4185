"""Conversation identity and ingest: resends, extensions, forks, replies, atomicity."""

from __future__ import annotations

from typing import Any

import pytest

from compaction.types import Message
from config.errors import InvalidRequestError, NotFoundError
from store.encoding.identity import chain_hashes
from store.models import SearchQuery
from store.sqlite.store import Store
from store.tenant import TenantStore
from tests.store.store_helpers import TokenCounter, history, scalar


def _count(store: Store, table: str) -> int:
    return int(scalar(store, f"SELECT COUNT(*) FROM {table}"))


def _sdk_echo(m: dict[str, Any]) -> dict[str, Any]:
    """What an SDK sends back for an assistant reply it received."""
    if m["role"] != "assistant":
        return m
    return {**m, "refusal": None, "annotations": [], "audio": None, "function_call": None}


@pytest.mark.parametrize("external_id", [None, "thread-42"])
def test_ten_turns_of_full_resend_store_each_message_once(
        store: Store, alice: TenantStore, counter: TokenCounter, external_id: str | None) -> None:
    msgs: list[Message] = [{"role": "system", "content": "You are terse."}]
    conversation_ids = set()
    for turn in range(10):
        msgs.append({"role": "user", "content": f"question {turn}"})
        result = alice.ingest(msgs, model="gpt-4o", external_id=external_id, count_tokens=counter)
        assert result.new_count == (2 if turn == 0 else 1)
        assert [m.seq for m in result.messages] == list(range(len(msgs)))
        reply = {"role": "assistant", "content": f"answer {turn}"}
        alice.append_reply(result.conversation.id, reply, token_count=5, parent_seq=len(msgs) - 1)
        msgs.append(_sdk_echo(reply))  # next resend carries SDK noise on the reply
        conversation_ids.add(result.conversation.id)
    assert len(conversation_ids) == 1
    assert _count(store, "messages") == 21 and _count(store, "conversations") == 1
    assert len(counter.seen) == 11  # system + 10 user messages; replies were counted by the caller
    stored = alice.messages(next(iter(conversation_ids)))
    assert [m.source for m in stored].count("reply") == 10
    assert [m.chain_hash for m in stored] == chain_hashes(msgs)


def test_resend_is_idempotent_and_counts_nothing(alice: TenantStore, counter: TokenCounter) -> None:
    msgs = history(3)
    first = alice.ingest(msgs, model="m", external_id=None, count_tokens=counter)
    seen = len(counter.seen)
    again = alice.ingest([dict(m) for m in msgs], model="m", external_id=None, count_tokens=counter)
    assert again.new_count == 0 and not again.forked
    assert again.conversation.id == first.conversation.id
    assert [m.id for m in again.messages] == [m.id for m in first.messages]
    assert len(counter.seen) == seen


def test_extension_appends_only_new(alice: TenantStore, counter: TokenCounter) -> None:
    msgs = history(2)
    first = alice.ingest(msgs, model="m", external_id=None, count_tokens=counter)
    more = [*msgs, {"role": "user", "content": "and one more"}]
    counter.seen.clear()
    second = alice.ingest(more, model="m", external_id=None, count_tokens=counter)
    assert second.new_count == 1 and counter.seen == [more[-1]]
    assert second.conversation.id == first.conversation.id
    assert second.conversation.message_count == len(more)
    assert second.messages[:-1] == first.messages


def test_edited_history_forks(store: Store, alice: TenantStore, counter: TokenCounter) -> None:
    msgs = history(3)
    original = alice.ingest(msgs, model="m", external_id=None, count_tokens=counter)
    edited = [*msgs[:3], {"role": "user", "content": "a different second question"}]
    fork = alice.ingest(edited, model="m", external_id=None, count_tokens=counter)
    assert fork.forked and fork.conversation.forked_from == original.conversation.id
    assert fork.conversation.id != original.conversation.id and fork.new_count == len(edited)
    assert alice.conversation(original.conversation.id).message_count == len(msgs)  # untouched
    assert [m.message for m in alice.messages(original.conversation.id)] == msgs
    # the fork is now the newest: extending the edited history continues it
    extended = alice.ingest([*edited, {"role": "assistant", "content": "ok"}], model="m",
                            external_id=None, count_tokens=counter)
    assert extended.conversation.id == fork.conversation.id and extended.new_count == 1


def test_shared_system_prompt_alone_is_not_a_fork(alice: TenantStore, counter: TokenCounter) -> None:
    a = alice.ingest(history(2, topic="cats"), model="m", external_id=None, count_tokens=counter)
    b = alice.ingest(history(2, topic="dogs"), model="m", external_id=None, count_tokens=counter)
    assert b.conversation.id != a.conversation.id
    assert not b.forked and b.conversation.forked_from is None


def test_shorter_resend_is_a_prefix_not_a_fork(alice: TenantStore, counter: TokenCounter) -> None:
    msgs = history(3)
    first = alice.ingest(msgs, model="m", external_id=None, count_tokens=counter)
    retry = alice.ingest(msgs[:4], model="m", external_id=None, count_tokens=counter)
    assert retry.conversation.id == first.conversation.id and retry.new_count == 0 and not retry.forked
    assert retry.messages == first.messages[:4]


def test_external_id_path(alice: TenantStore, counter: TokenCounter) -> None:
    a = alice.ingest(history(1), model="m", external_id="ext-1", count_tokens=counter)
    b = alice.ingest(history(1), model="m", external_id="ext-2", count_tokens=counter)
    assert a.conversation.id != b.conversation.id  # same history, different threads
    assert a.conversation.external_id == "ext-1"
    edited = [{"role": "system", "content": "new system prompt"}, {"role": "user", "content": "hi"}]
    fork = alice.ingest(edited, model="m", external_id="ext-1", count_tokens=counter)
    assert fork.forked and fork.conversation.forked_from == a.conversation.id
    again = alice.ingest(edited, model="m", external_id="ext-1", count_tokens=counter)
    assert again.conversation.id == fork.conversation.id and again.new_count == 0


def test_reply_with_sdk_noise_and_text_parts_matches(alice: TenantStore, counter: TokenCounter) -> None:
    msgs = history(1)
    conv = alice.ingest(msgs, model="m", external_id=None, count_tokens=counter).conversation
    reply = alice.append_reply(conv.id, {"role": "assistant", "content": "Here it is.", "refusal": None}, 4,
                               parent_seq=len(msgs) - 1)
    assert reply.source == "reply" and reply.seq == len(msgs)
    assert reply.message == {"role": "assistant", "content": "Here it is.", "refusal": None}  # lossless
    echoed = {"role": "assistant", "content": [{"type": "text", "text": "Here it is."}], "annotations": []}
    nxt = alice.ingest([*msgs, echoed, {"role": "user", "content": "thanks"}], model="m",
                       external_id=None, count_tokens=counter)
    assert nxt.conversation.id == conv.id and nxt.new_count == 1 and nxt.messages[len(msgs)].id == reply.id


def test_pinned_is_stored_outside_the_message(alice: TenantStore, counter: TokenCounter) -> None:
    msgs = [{"role": "user", "content": "budget is 4000 EUR", "pinned": True}]
    result = alice.ingest(msgs, model="m", external_id=None, count_tokens=counter)
    stored = alice.message(result.messages[0].id)
    assert stored.pinned and "pinned" not in stored.message
    later = alice.ingest([{"role": "user", "content": "x"}, {"role": "user", "content": "y"}], model="m",
                         external_id=None, count_tokens=counter)
    repinned = alice.ingest([{"role": "user", "content": "x", "pinned": True},
                             {"role": "user", "content": "y"}], model="m", external_id=None,
                            count_tokens=counter)
    assert repinned.new_count == 0 and repinned.messages[0].pinned
    assert alice.message(later.messages[0].id).pinned


def test_failure_mid_ingest_writes_nothing(store: Store, alice: TenantStore) -> None:
    def failing(m: dict[str, Any]) -> int:
        if m["content"].startswith("turn 1"):
            raise RuntimeError("tokenizer exploded")
        return 1

    with pytest.raises(RuntimeError):
        alice.ingest(history(3), model="m", external_id=None, count_tokens=failing)
    assert _count(store, "messages") == 0 and _count(store, "conversations") == 0
    assert alice.search(SearchQuery("turn", all_conversations=True)) == []
    if isinstance(store, Store):  # the FTS5 shadow tables and the connection are SQLite's
        assert _count(store, "messages_fts_docsize") == 0 and _count(store, "messages_tri_docsize") == 0
        assert not store.conn.in_transaction


def test_empty_history_rejected(alice: TenantStore, counter: TokenCounter) -> None:
    with pytest.raises(InvalidRequestError):
        alice.ingest([], model="m", external_id=None, count_tokens=counter)


def test_message_ranges_and_lookups(alice: TenantStore, counter: TokenCounter) -> None:
    result = alice.ingest(history(3), model="m", external_id=None, count_tokens=counter)
    cid = result.conversation.id
    assert [m.seq for m in alice.messages(cid, start_seq=2, end_seq=5)] == [2, 3, 4]
    assert alice.messages(cid)[0].token_count == counter(history(3)[0])
    assert alice.message(result.messages[3].id).message == history(3)[3]
    assert [c.id for c in alice.list_conversations()] == [cid]
    with pytest.raises(NotFoundError):
        alice.message(10_000)
    with pytest.raises(NotFoundError):
        alice.conversation("conv_nope")


def test_append_reply_unknown_conversation(alice: TenantStore) -> None:
    with pytest.raises(NotFoundError):
        alice.append_reply("conv_nope", {"role": "assistant", "content": "x"}, 1, parent_seq=0)
