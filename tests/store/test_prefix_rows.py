"""Ingest with the stored-prefix row cache answers exactly as a fresh read would
(store/history/prefix_rows.py)."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from compaction.types import Message
from config.settings import StoreSettings
from store.encoding.identity import chain_hashes
from store.history.prefix_rows import MAX_MADE_BYTES, MAX_ROWS, NOTHING_MADE, ROW_BYTES, Made, PrefixRows
from store.interface import StoreBackend, TenantAccess
from store.models import StoredMessage
from store.sqlite.store import Store
from tests.store.store_helpers import TokenCounter, history


def _resend(alice: TenantAccess, msgs: list[Message], counter: TokenCounter) -> list[tuple[Any, ...]]:
    result = alice.ingest(msgs, model="gpt-4o", external_id=None, count_tokens=counter)
    return [(m.id, m.seq, m.role, m.token_count, m.chain_hash, m.content_hash, m.pinned, m.source, m.message)
            for m in result.messages]


def test_a_cached_resend_equals_a_fresh_read(store: StoreBackend, alice: TenantAccess,
                                             counter: TokenCounter) -> None:
    msgs = history(6)
    first = _resend(alice, msgs, counter)
    cached = _resend(alice, msgs, counter)  # rows now come from the cache
    store.prefix_rows.forget()  # type: ignore[attr-defined]
    assert cached == first == _resend(alice, msgs, counter)
    msgs = [*msgs, {"role": "assistant", "content": "done"}, {"role": "user", "content": "next"}]
    extended = _resend(alice, msgs, counter)
    assert extended[:len(first)] == first and [r[1] for r in extended] == list(range(len(msgs)))


def test_a_pin_made_elsewhere_is_seen(tmp_path: Path, counter: TokenCounter) -> None:
    """Another process sharing the database pins an old message: the cached row's flag is not trusted."""
    settings = StoreSettings(path=str(tmp_path / "ctx.db"))
    one, other = Store.open(settings), Store.open(settings)
    try:
        tenant = one.tenant_id_for_key("sk-alice")
        msgs = history(4)
        one.for_tenant(tenant).ingest(msgs, model="gpt-4o", external_id=None, count_tokens=counter)
        one.for_tenant(tenant).ingest(msgs, model="gpt-4o", external_id=None, count_tokens=counter)
        pinned = [dict(m) for m in msgs]
        pinned[1]["pinned"] = True
        other.for_tenant(tenant).ingest(pinned, model="gpt-4o", external_id=None, count_tokens=counter)
        again = one.for_tenant(tenant).ingest(msgs, model="gpt-4o", external_id=None, count_tokens=counter)
        assert [m.pinned for m in again.messages] == [i == 1 for i in range(len(msgs))]
    finally:
        one.close()
        other.close()


def _rows(cid: str, chain: list[str]) -> tuple[tuple[Any, ...], ...]:
    return tuple((i, cid, i, "user", 5, h, "c", 0, "client", 0.0) for i, h in enumerate(chain))


def test_rows_are_used_only_under_the_requests_chain() -> None:
    cache = PrefixRows(max_rows=100)
    chain = chain_hashes([{"role": "user", "content": f"m{i}"} for i in range(5)])
    cache.keep("conv_a", _rows("conv_a", chain))
    assert len(cache.leading("conv_a", chain, 5)) == 5
    assert len(cache.leading("conv_a", [*chain, "later"], 6)) == 5  # only what is cached
    assert len(cache.leading("conv_a", chain[:3], 3)) == 3
    other = chain_hashes([{"role": "user", "content": "different"}] * 5)
    assert cache.leading("conv_a", other, 5) == ()
    assert cache.leading("conv_b", chain, 5) == ()


def test_the_bound_drops_the_least_recently_used() -> None:
    cache = PrefixRows(max_rows=10)
    chain = chain_hashes([{"role": "user", "content": f"m{i}"} for i in range(4)])
    for cid in ("a", "b"):
        cache.keep(cid, _rows(cid, chain))
    cache.leading("a", chain, 4)  # a is now the most recently used
    cache.keep("c", _rows("c", chain))
    assert cache.held <= 10
    assert cache.leading("b", chain, 4) == () and len(cache.leading("a", chain, 4)) == 4
    cache.keep("huge", _rows("huge", chain_hashes([{"role": "user", "content": "x"}] * 11)))
    assert cache.leading("huge", chain, 4) == () and cache.held <= 10


@pytest.mark.slow
def test_a_kept_row_costs_at_most_row_bytes(store: StoreBackend, alice: TenantAccess) -> None:
    """What the cache holds after resends, measured (tracemalloc), is within its stated bound per row."""
    histories = [history(50, topic=f"topic {c}") for c in range(20)]
    for msgs in histories:
        alice.ingest(msgs, model="gpt-4o", external_id=None, count_tokens=lambda m: 5)
    rows: PrefixRows = store.prefix_rows  # type: ignore[attr-defined]
    rows.forget()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for msgs in histories:  # resends: every stored row read once, and kept
            alice.ingest(msgs, model="gpt-4o", external_id=None, count_tokens=lambda m: 5)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert rows.held == 20 * 101 and rows.made_bytes > 0  # the rows, and the records made of them
    assert grown <= rows.held_bytes
    assert rows.held_bytes == rows.held * ROW_BYTES + rows.made_bytes
    assert rows.max_bytes == MAX_ROWS * ROW_BYTES + MAX_MADE_BYTES


def test_a_resend_reuses_the_records_it_made(alice: TenantAccess, counter: TokenCounter) -> None:
    msgs = history(4)
    alice.ingest(msgs, model="gpt-4o", external_id=None, count_tokens=counter)
    made = alice.ingest(msgs, model="gpt-4o", external_id=None, count_tokens=counter).messages  # read, kept
    again = alice.ingest([dict(m) for m in msgs], model="gpt-4o", external_id=None,
                         count_tokens=counter).messages
    assert all(a is b for a, b in zip(made, again, strict=True))  # the same exact JSON: the same records


def test_a_record_is_rebuilt_when_the_bytes_or_the_pin_differ(alice: TenantAccess,
                                                              counter: TokenCounter) -> None:
    msgs = history(3)
    for _ in range(2):
        kept = alice.ingest(msgs, model="gpt-4o", external_id=None, count_tokens=counter).messages
    echoed = [dict(m) for m in msgs]
    echoed[2] = {**echoed[2], "refusal": None}  # the same identity (normalised), other bytes
    echoed[3] = {**echoed[3], "pinned": True}  # pinned now: the row's flag changes
    again = alice.ingest(echoed, model="gpt-4o", external_id=None, count_tokens=counter).messages
    assert again[2] is not kept[2] and again[2].message == {**msgs[2], "refusal": None}
    assert again[3] is not kept[3] and again[3].pinned and "pinned" not in again[3].message
    assert [a is k for a, k in zip(again, kept, strict=True)] == [True, True, False, False, True, True, True]


def _made(cid: str, n: int, size: int) -> tuple[tuple[tuple[Any, ...], ...], Made]:
    chain = chain_hashes([{"role": "user", "content": f"{cid}{i}"} for i in range(n)])
    rows = _rows(cid, chain)
    records = tuple(StoredMessage(id=r[0], conversation_id=cid, seq=r[2], role="user", message={},
                                  token_count=5, chain_hash=r[5], content_hash="c") for r in rows)
    return rows, Made.of(rows, tuple(b"x" * size for _ in rows), records, NOTHING_MADE)


def test_records_are_bounded_in_bytes() -> None:
    one = _made("x", 4, 100)[1].size
    cache = PrefixRows(max_rows=1_000, max_made_bytes=2 * one + one // 2)
    for cid in ("a", "b", "c"):
        cache.keep(cid, *_made(cid, 4, 100))
    assert cache.made_bytes <= 2 * one + one // 2 and cache.made("a").messages == ()  # the oldest first
    assert len(cache.made("c").messages) == 4
    rows, made = _made("big", 12, 100)  # over the bound alone: its rows are kept, its records are not
    cache.keep("big", rows, made)
    assert cache.made("big").messages == () and len(cache.leading("big", [r[5] for r in rows], 12)) == 12
    # ingest asks first, and does not copy the keys of records that would not be kept
    assert not cache.fits_made(made.keys) and cache.fits_made(made.keys[:4])
    assert cache.made_bytes <= 2 * one + one // 2
    assert cache.held_bytes == cache.held * ROW_BYTES + cache.made_bytes


def test_records_are_reused_only_over_the_same_rows_and_bytes() -> None:
    rows, made = _made("a", 3, 10)
    assert made.leading(rows, made.keys) == made.messages
    assert made.leading(rows, (*made.keys[:2], b"y" * 10)) == ()  # another message: record by record
    flagged = (*rows[:2], (*rows[2][:7], 1, *rows[2][8:]))
    assert made.leading(flagged, made.keys) == ()
    assert made.reusable(2, flagged[2], made.keys[2]) is None  # pinned since: rebuilt
    assert made.reusable(1, rows[1], made.keys[1]) is made.messages[1]
    assert made.reusable(1, rows[1], None) is None  # a message outside JSON's own types: never
