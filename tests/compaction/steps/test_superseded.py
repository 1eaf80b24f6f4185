"""Pinning referenced rounds within their share, and prepared summaries never taking a pinned round."""

from __future__ import annotations

from compaction.steps.prepared import leaf_fit
from compaction.steps.superseded import pinned_groups
from compaction.view.backrefs import BackRefs
from compaction.view.entry import Entry
from store.models import SummaryRecord


def message(seq: int, role: str, tokens: int, group: int, pinned: bool = False) -> Entry:
    return Entry("message", str(seq), tokens, role, group, seq, pinned=pinned, message_id=100 + seq)


def rounds() -> list[Entry]:
    return [message(0, "user", 10, 0),
            message(1, "assistant", 20, 1), message(2, "tool", 900, 1), message(3, "tool", 5_000, 1),
            message(4, "assistant", 20, 2), message(5, "tool", 1_500, 2),
            message(6, "assistant", 20, 3), message(7, "tool", 30, 3)]


def test_the_newest_referenced_rounds_are_pinned_within_the_cap() -> None:
    refs = BackRefs(referenced=frozenset({2, 5}))
    # a round costs its referenced results and its calls, not its other results (those may be elided)
    assert pinned_groups(rounds(), refs, cap=3_000) == {1, 2}
    assert pinned_groups(rounds(), refs, cap=2_000) == {2}  # the newest first; the older one compacts
    assert pinned_groups(rounds(), refs, cap=100) == frozenset()


def test_a_prepared_leaf_summary_never_stands_for_a_pinned_round() -> None:
    entries = rounds()
    record = SummaryRecord("sum_000000000001", "c", "leaf", 0, 1, "extractive", "s", 5, 1, 5,
                           (101, 102, 103, 104, 105), (), "local/extractive", "v1")
    assert leaf_fit(entries, record, frozenset()) == (1, 2, 3, 4, 5)
    pinned = [message(e.seq, e.role, e.tokens, e.group, pinned=e.group == 2) for e in entries]
    assert leaf_fit(pinned, record, frozenset()) is None
