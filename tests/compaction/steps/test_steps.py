"""A step's choices: old oversized tool results give way first, by just what is needed; a chunk that
would free far more than needed is traded for trimming its largest result; the fresh tail is sized
on what the history may use; an elision is never offered as a prepared summary."""

from __future__ import annotations

from compaction.steps.loop import MIN_TRIMMED_TOKENS, candidates, tail_cap, trim_instead
from compaction.steps.prepared import Prepared
from compaction.view.budget import Budget
from compaction.view.entry import Entry
from compaction.view.workview import WorkingView
from config.settings import CompactionSettings
from store.models import StoredMessage, SummaryRecord

SETTINGS = CompactionSettings(fresh_tail_count=4)
BUDGET = Budget.compute(SETTINGS, 12_000, None, 0)  # total 8,744; oversized 2,186


def entries(sizes: list[tuple[str, int]]) -> list[Entry]:
    """A user task then tool rounds: ("a", n) an assistant call, ("t", n) its result."""
    out = [Entry("message", "0", 50, "user", 0, 0, message_id=100)]
    group = 0
    for seq, (kind, tokens) in enumerate(sizes, start=1):
        group += kind == "a"
        role = "assistant" if kind == "a" else "tool"
        out.append(Entry("message", str(seq), tokens, role, group, seq, message_id=100 + seq))
    return out


def view(items: list[Entry], system_tokens: int = 0) -> WorkingView:
    system = (StoredMessage(1, "c", -1, "system", {"role": "system", "content": "s"}, system_tokens,
                            "", ""),) if system_tokens else ()
    return WorkingView("c", {}, {}, tuple(items), system, items[-1].seq)


def test_an_old_oversized_result_is_elided_by_the_excess_first() -> None:
    rounds = [("a", 40), ("t", 200)] * 3 + [("a", 40), ("t", 5_000)] + [("a", 40), ("t", 200)] * 6
    wv = view(entries(rounds))
    first = candidates(wv, SETTINGS, BUDGET, reach="before_tail", excess=1_000)[0]
    assert first.kind == "elide" and wv.entries[first.chunk[0]].tokens == 5_000
    assert first.allowance == 4_000  # exactly what is needed
    deep = candidates(wv, SETTINGS, BUDGET, reach="before_tail", excess=9_000)[0]
    assert deep.allowance == BUDGET.oversized // 2  # never below half the oversized limit
    recent = view(entries([("a", 40), ("t", 200)] * 6 + [("a", 40), ("t", 5_000)]))
    assert all(c.kind != "elide" for c in candidates(recent, SETTINGS, BUDGET, reach="before_tail",
                                                     excess=1_000))  # the newest round: not in a step


def test_a_chunk_freeing_far_more_than_needed_is_traded_for_a_trim() -> None:
    wv = view(entries([("a", 40), ("t", 1_500), ("a", 40), ("t", 300)]))
    chunk = (1, 2, 3, 4)
    trim = trim_instead(wv, chunk, saving=1_500, excess=200)
    assert trim is not None and trim.kind == "elide" and trim.chunk == (2,) and trim.allowance == 1_300
    assert trim_instead(wv, chunk, saving=1_500, excess=800) is None  # the chunk lands near enough
    assert trim_instead(wv, chunk, saving=3_000, excess=1_200) is None  # a third must stay
    small = view(entries([("a", 40), ("t", MIN_TRIMMED_TOKENS)]))
    assert trim_instead(small, (1, 2), saving=1_000, excess=64) is None


def test_the_fresh_tail_is_sized_on_what_the_history_may_use() -> None:
    big_task = entries([("a", 40), ("t", 200)])
    big_task[0] = Entry("message", "0", 4_000, "user", 0, 0, message_id=100)
    share = BUDGET.fresh_tail_max_percent
    assert tail_cap(view(big_task, system_tokens=500), BUDGET) == (BUDGET.messages - 4_500) * share // 100
    short = tail_cap(view(entries([("a", 40)])), BUDGET)  # a short task: capped by the budget's share
    assert short == min(BUDGET.fresh_tail_max, (BUDGET.messages - 50) * share // 100)


def test_an_elision_is_never_offered_as_a_prepared_summary() -> None:
    record = SummaryRecord("sum_000000000001", "c", "leaf", 0, 1, "elision", "cut", 3, 2, 2, (102,), (),
                           "local/elision", "")
    wv = view(entries([("a", 40), ("t", 3_000)] * 8))
    options = candidates(wv, SETTINGS, BUDGET, reach="into_tail", excess=100)
    assert Prepared([record]).first_fit(wv, [c for c in options if c.kind != "elide"]) is None
