"""Memoised running hashes equal the direct computation, whatever was memoised before (bounded)."""

from __future__ import annotations

import gc
import hashlib
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.engine import prefix_hashes
from compaction.types import Message
from store.encoding.fastjson import dumps_sorted
from store.encoding.identity import chain_hashes, chain_of
from store.encoding.running_hashes import RunningHashes

CONTENT = st.one_of(st.text(max_size=8), st.none(), st.integers(), st.floats(allow_nan=False),
                    st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=5)}),
                             max_size=2))
MESSAGES = st.lists(st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool"]), "content": CONTENT},
    optional={"refusal": st.none(), "name": st.text(max_size=3), "pinned": st.booleans()}), max_size=6)


def _forwarded_direct(messages: list[Message]) -> tuple[str, ...]:
    out, previous = [], ""
    for m in messages:
        previous = hashlib.sha256(previous.encode() + dumps_sorted(m)).hexdigest()
        out.append(previous)
    return tuple(out)


@settings(max_examples=200)
@given(st.lists(MESSAGES, min_size=1, max_size=4))
def test_memoised_equals_direct(histories: list[list[dict[str, Any]]]) -> None:
    for history in histories:  # each one may reuse what the previous ones memoised
        for upto in (len(history) // 2, len(history)):
            assert chain_of(history[:upto]) == chain_hashes(history[:upto])
            assert prefix_hashes(tuple(history[:upto])) == _forwarded_direct(history[:upto])


def test_the_memo_is_used_and_bounded() -> None:
    steps: list[str] = []

    def step(previous: str, m: dict[str, Any]) -> str:
        steps.append(m["content"])
        return hashlib.sha256((previous + m["content"]).encode()).hexdigest()

    memo = RunningHashes(step, max_bytes=5_000)
    history = [{"role": "user", "content": f"message {i}"} for i in range(5)]
    first = memo.over(history)
    assert memo.over(history) == first and len(steps) == 5  # the resend is looked up
    memo.over([*history, {"role": "user", "content": "new"}])
    assert steps[-1] == "new" and len(steps) == 6
    for i in range(100):
        memo.over([{"role": "user", "content": f"other {i}" * 10}])
    assert memo.held_bytes <= 5_000
    floats = [{"role": "user", "content": "x", "weight": 0.5}]
    memo.over(floats)
    memo.over(floats)
    assert steps[-2:] == ["x", "x"]  # a float is never memoised, always computed


def test_a_sequence_over_half_the_memo_leaves_the_memo_alone() -> None:
    """A history too long to keep (a resumed 50,000-message session) is hashed without memoising it:
    it would evict everyone else's entries, then be evicted itself before its next turn."""
    steps: list[str] = []

    def step(previous: str, m: dict[str, Any]) -> str:
        steps.append(m["content"])
        return hashlib.sha256((previous + m["content"]).encode()).hexdigest()

    memo = RunningHashes(step, max_bytes=8_000, max_run_bytes=2_000)
    small = [{"role": "user", "content": "a short conversation"}]
    memo.over(small, run="small")
    held = memo.held_bytes
    long = [{"role": "user", "content": f"imported message {i}"} for i in range(12)]  # > 4,000 bytes held
    assert memo.over(long, run="long") == memo.over(long, run="long")  # hashed twice, the same
    assert len(steps) == 1 + 2 * len(long) and memo.held_bytes == held  # neither memo nor run kept it
    memo.over(small, run="small")
    assert len(steps) == 1 + 2 * len(long)  # the short one is still a hit


@pytest.mark.slow
@pytest.mark.parametrize("words", [1, 30, 300])  # ~40-byte to ~9 KiB messages
def test_the_bound_holds_in_real_bytes(words: int) -> None:
    """Filled far past its bound, the memo holds about `max_bytes` (tracemalloc), not a multiple of it:
    orjson hands out >= 4 KiB buffers, which a kept key must not be."""
    def fill() -> RunningHashes:
        memo = RunningHashes(_content_step, max_bytes=1 << 20, max_run_bytes=0)
        for c in range(600):
            memo.over([{"role": "user", "content": f"conv {c}: turn {i} " * words} for i in range(10)])
        return memo

    held, memo = _traced(fill)
    assert memo.held_bytes <= memo.max_bytes == 1 << 20
    assert 0.75 * memo.max_bytes <= held <= 1.25 * memo.max_bytes


@settings(max_examples=150)
@given(st.lists(MESSAGES, min_size=1, max_size=5), st.lists(st.integers(0, 6), min_size=1, max_size=5))
def test_a_runs_last_sequence_gives_the_direct_hashes(histories: list[list[dict[str, Any]]],
                                                      cuts: list[int]) -> None:
    """Resends under one run key (longer, shorter, another history) hash as if computed afresh."""
    memo = RunningHashes(lambda previous, m: hashlib.sha256(previous.encode() + dumps_sorted(m)).hexdigest())
    for history, cut in zip(histories, cuts, strict=False):
        for part in (history[:cut], history, history[:cut]):
            assert tuple(memo.over(part, run="conv")) == _forwarded_direct(part)
            assert tuple(prefix_hashes(tuple(part), None, "conv_x")) == _forwarded_direct(part)


def test_a_run_is_compared_in_order_and_bounded() -> None:
    steps: list[str] = []

    def step(previous: str, m: dict[str, Any]) -> str:
        steps.append(m["content"])
        return hashlib.sha256((previous + m["content"]).encode()).hexdigest()

    memo = RunningHashes(step, max_bytes=0, max_run_bytes=3_000)  # nothing memoised: only the run
    history = [{"role": "user", "content": f"message {i}"} for i in range(5)]
    first = memo.over(history, run="a")
    assert memo.over([*history, {"role": "user", "content": "new"}], run="a")[:5] == first
    assert steps[5:] == ["new"]  # the run gave the first five
    assert memo.over(history, previous="other", run="a") != first  # another starting hash: no reuse
    for i in range(50):
        memo.over([{"role": "user", "content": f"other {i}" * 20}], run=f"r{i}")
    assert memo.run_bytes <= 3_000


@pytest.mark.slow
def test_runs_hold_their_bound_in_real_bytes() -> None:
    """Kept runs are right-sized copies of the request's keys: what they hold, measured, is about
    what they count, not orjson's 4 KiB buffers."""
    def fill() -> RunningHashes:
        memo = RunningHashes(_content_step, max_bytes=0, max_run_bytes=1 << 20)  # runs only
        for c in range(300):
            history = [{"role": "user", "content": f"conv {c}: turn {i} " * 3} for i in range(40)]
            memo.over(history, run=c)
            memo.over([*history, {"role": "user", "content": "more"}], run=c)  # shares 40, copies 1
        return memo

    held, memo = _traced(fill)
    assert memo.run_bytes <= 1 << 20
    assert 0.5 * memo.run_bytes <= held <= 1.25 * memo.run_bytes


def _content_step(previous: str, m: dict[str, Any]) -> str:
    return hashlib.sha256((previous + m["content"]).encode()).hexdigest()


def _traced(fill: Callable[[], RunningHashes]) -> tuple[int, RunningHashes]:
    """Bytes still allocated (tracemalloc) after `fill` ran, once garbage is collected, and its memo."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        memo = fill()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, memo
    finally:
        tracemalloc.stop()
