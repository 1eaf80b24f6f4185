"""PostgreSQL: writes to one conversation serialise across connections (processes); others do not wait.

Two PgStores are two connections, as two replicas are. One holds a conversation's lock in an open
transaction; the other, with a lock_timeout, must wait (and give up) on the same conversation and
must not wait on another one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from compaction.types import Message
from config.errors import StoreError
from config.settings import StoreSettings
from store.postgres.store import PgStore
from store.tenant import TenantStore
from tests.store.store_helpers import TokenCounter, history


@pytest.fixture
def replicas(pg_url: str) -> Iterator[tuple[PgStore, PgStore]]:
    a, b = PgStore.open(StoreSettings(url=pg_url)), PgStore.open(StoreSettings(url=pg_url))
    yield a, b
    a.close()
    b.close()


def _tenant(store: PgStore) -> TenantStore:
    return store.for_tenant(store.tenant_id_for_key("sk-locks"))


def _next_turn(msgs: list[Message], text: str) -> list[Message]:
    return [*msgs, {"role": "user", "content": text}]


def test_one_conversation_waits_for_the_other_replica(replicas: tuple[PgStore, PgStore]) -> None:
    a, b = replicas
    counter = TokenCounter()
    first = _tenant(a).ingest(history(2), model="m", external_id=None, count_tokens=counter)
    other = _tenant(a).ingest(history(2, topic="rockets"), model="m", external_id=None, count_tokens=counter)
    b.db.execute("SET lock_timeout = '300ms'")
    with _tenant(a)._tx(first.conversation.id):  # replica A is writing to the first conversation
        with pytest.raises(StoreError, match="LockNotAvailable|lock timeout"):
            _tenant(b).ingest(_next_turn(history(2), "more"), model="m", external_id=None,
                              count_tokens=counter)
        grown = _tenant(b).ingest(_next_turn(history(2, topic="rockets"), "more"), model="m",
                                  external_id=None, count_tokens=counter)  # another one: no wait
    assert grown.conversation.id == other.conversation.id and grown.new_count == 1
    after = _tenant(b).ingest(_next_turn(history(2), "more"), model="m", external_id=None,
                              count_tokens=counter)  # A committed: B goes ahead
    assert after.conversation.id == first.conversation.id and after.new_count == 1


def test_concurrent_identical_turns_store_each_message_once(replicas: tuple[PgStore, PgStore]) -> None:
    counter = TokenCounter()
    base = _tenant(replicas[0]).ingest(history(3), model="m", external_id=None, count_tokens=counter)
    turn = _next_turn(history(3), "the same next turn, sent to both replicas at once")
    barrier = threading.Barrier(2)
    results: list[Any] = []

    def send(store: PgStore) -> None:
        barrier.wait()
        for _ in range(5):
            results.append(_tenant(store).ingest(turn, model="m", external_id=None, count_tokens=counter))

    threads = [threading.Thread(target=send, args=(s,)) for s in replicas]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 10 and {r.conversation.id for r in results} == {base.conversation.id}
    assert sorted(r.new_count for r in results) == [0] * 9 + [1]
    assert [m.seq for m in _tenant(replicas[1]).messages(base.conversation.id)] == list(range(len(turn)))
