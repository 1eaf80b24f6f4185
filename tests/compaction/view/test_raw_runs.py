"""compaction/view/raw_runs.py gives exactly `raw_entries` of each run, whatever runs it saw before
(extended, cut short, diverging, tool rounds growing), and stays bounded."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.types import Message
from compaction.view.plan import raw_entries
from compaction.view.raw_runs import RawRuns
from store.models import StoredMessage
from tests.compaction.conftest import asst, sys, tool, user

KINDS = st.sampled_from(["user", "assistant", "call", "result", "system"])


def _message(kind: str, i: int) -> dict[str, Any]:
    return {"user": user(f"u{i}"), "assistant": asst(f"a{i}"), "call": asst(None, [f"c{i}"]),
            "result": tool(f"c{i - 1}", f"r{i}"), "system": sys(f"s{i}")}[kind]


def _record(message: Message, seq: int, cid: str = "conv_a") -> StoredMessage:
    return StoredMessage(id=1_000 + seq, conversation_id=cid, seq=seq, role=message["role"], message=message,
                         token_count=5 + seq % 3, chain_hash=f"h{seq}", content_hash=f"c{seq}",
                         pinned=seq % 7 == 0)


def _expected(run: list[StoredMessage], first_group: int) -> list[Any]:
    return raw_entries([(m.message, m.seq, m.id, m.token_count, m.pinned) for m in run], first_group)


@settings(max_examples=150)
@given(st.lists(KINDS, min_size=1, max_size=30), st.lists(st.tuples(st.integers(0, 30), st.booleans()),
                                                          min_size=1, max_size=8), st.integers(0, 3))
def test_memoised_entries_equal_raw_entries(kinds: list[str], steps: list[tuple[int, bool]],
                                            first_group: int) -> None:
    """Each step uses a prefix of one history (records kept: a resend) or rebuilds records from a
    point on (a divergence: new objects with the same values)."""
    runs = RawRuns()
    records = [_record(_message(k, i), i) for i, k in enumerate(kinds)]
    for length, diverge in steps:
        if diverge:
            cut = length % len(records)
            records = records[:cut] + [_record(dict(m.message), m.seq) for m in records[cut:]]
        run = records[:max(1, min(length, len(records)))]
        assert runs.entries(run, first_group) == _expected(run, first_group)


def test_a_resend_reuses_the_leading_entries_and_rebuilds_the_newest_group() -> None:
    runs = RawRuns()
    records = [_record(m, i) for i, m in enumerate([user("q"), asst(None, ["c1"]), tool("c1", "r1")])]
    first = runs.entries(records, 0)
    more = [*records, _record(tool("c1", "r2"), 3), _record(user("next"), 4)]  # the round grows
    second = runs.entries(more, 0)
    assert second == _expected(more, 0)
    assert second[0] is first[0]  # the user message's group is reused as is
    assert second[1] is not first[1] and second[1] == first[1]  # the open round's group is rebuilt
    assert runs.entries(more, 0)[4] is second[4]  # the same records again: every entry reused


def test_runs_are_bounded_by_the_records_they_hold() -> None:
    runs = RawRuns(max_records=20)
    for c in range(10):
        run = [_record(user(f"{c}-{i}"), i, cid=f"conv_{c}") for i in range(6)]
        runs.entries(run, 0)
        assert runs.held <= 20
    assert len(runs) == 3
    huge = [_record(user(f"h{i}"), i, cid="conv_huge") for i in range(21)]
    assert runs.entries(huge, 0) == _expected(huge, 0) and runs.held <= 20
