"""compaction/view/slot_memo.py gives exactly the planner's `view_slots`, whatever views it saw before
(resends, new entry objects, new body dicts, summaries, elisions, protection moving), reuses the
slots a resend leaves unchanged, and stays bounded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.view.entry import Entry
from compaction.view.plan import Slot, view_slots
from compaction.view.slot_memo import SlotMemo

Bodies = dict[int, dict[str, Any]]
# (kind, role, starts a new group) of each position
SHAPES = st.tuples(st.sampled_from(["message", "message", "message", "summary", "elided"]),
                   st.sampled_from(["user", "assistant", "tool"]), st.booleans())


def _entries(shapes: list[tuple[str, str, bool]]) -> list[Entry]:
    out, group = [], 0
    for seq, (kind, role, new_group) in enumerate(shapes):
        group += 1 if new_group or kind == "summary" or seq == 0 else 0
        if kind == "summary":
            out.append(Entry("summary", f"sum_{seq}", 40, "summary", group, seq, depth=0))
        else:
            out.append(Entry("message", str(seq), 5 + seq % 4, role, group, seq, message_id=100 + seq,
                             elided=f"eli_{seq}" if kind == "elided" else None))
    return out


def _render(bodies: Bodies) -> Callable[[Entry], dict[str, Any]]:
    """As view_plan.plan_for renders: a plain message is its body dict, anything else a new dict."""
    def render(entry: Entry) -> dict[str, Any]:
        if entry.kind == "summary":
            return {"role": "user", "content": f"summary {entry.ref}"}
        if entry.elided:
            return {**bodies[entry.seq], "content": f"elided {entry.elided}"}
        return bodies[entry.seq]
    return render


def _bodies(entries: list[Entry]) -> Bodies:
    return {e.seq: {"role": e.role, "content": f"m{e.seq}"} for e in entries}


def _check(got: list[Slot], entries: list[Entry], bodies: Bodies) -> None:
    assert got == view_slots(entries, _render(bodies))
    for slot, entry in zip(got, entries, strict=True):  # a plain message is forwarded as received
        if entry.kind == "message" and not entry.elided:
            assert slot.message is bodies[entry.seq]


@settings(max_examples=150)
@given(st.lists(SHAPES, min_size=1, max_size=30),
       st.lists(st.tuples(st.integers(1, 30), st.sampled_from(["same", "new_entries", "new_bodies"])),
                min_size=1, max_size=8))
def test_memoised_slots_equal_view_slots(shapes: list[tuple[str, str, bool]],
                                         steps: list[tuple[int, str]]) -> None:
    """Each step forwards a prefix of one view (a resend keeps the entry objects and body dicts),
    or the same values in new entry objects, or in new body dicts (another request's)."""
    memo = SlotMemo()
    entries = _entries(shapes)
    bodies = _bodies(entries)
    for length, change in steps:
        if change == "new_entries":
            entries = _entries(shapes)
        elif change == "new_bodies":
            bodies = _bodies(entries)
        view = entries[:min(length, len(entries))]
        _check(memo.slots("conv", view, _render(bodies), bodies), view, bodies)


def test_a_resend_reuses_its_unchanged_slots_and_rebuilds_the_rest() -> None:
    memo = SlotMemo()
    entries = _entries([("summary", "user", True), ("message", "user", True), ("message", "assistant", False),
                        ("message", "user", True), ("message", "user", True)])
    bodies = _bodies(entries)
    first = memo.slots("conv", entries[:4], _render(bodies), bodies)
    second = memo.slots("conv", entries, _render(bodies), bodies)
    _check(second, entries, bodies)
    assert second[1] is first[1] and second[2] is first[2]  # unchanged, unprotected: reused
    assert second[0] is not first[0]  # a summary renders anew
    assert first[3].protected and not second[3].protected  # no longer the last user message: rebuilt
    again = dict(bodies)
    again[2] = dict(bodies[2])  # an equal message in another request's dict
    third = memo.slots("conv", entries, _render(again), again)
    _check(third, entries, again)
    assert third[1] is second[1] and third[2] is not second[2]


def test_the_memo_stays_bounded_dropping_the_least_recently_used_conversation() -> None:
    memo = SlotMemo(max_slots=10)
    view = _entries([("message", "user", True)] * 4)
    bodies = _bodies(view)
    for conversation in ("a", "b", "c"):
        memo.slots(conversation, view, _render(bodies), bodies)
    assert memo.held == 8 and len(memo) == 2  # "a" dropped
    reused = memo.slots("b", view, _render(bodies), bodies)
    assert memo.slots("b", view, _render(bodies), bodies)[0] is reused[0]
    memo.slots("big", _entries([("message", "user", True)] * 11), _render(bodies | _bodies(
        _entries([("message", "user", True)] * 11))), bodies)
    assert memo.held <= 10  # a view over the bound is built, not kept
