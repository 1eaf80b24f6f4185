"""Invariants of planning + truncation over random conversations (hypothesis).

Whatever the conversation (parallel and nested tool rounds, huge tool outputs, pinned messages) and
whatever the budget, the forwarded list fits (counted with the real tokenizer), pairs every tool call
with its results, keeps every system message, ends with the client's last message, carries the last
user message raw (or the request is a 400 `context_length_exceeded`), and never holds a per-message
husk: a message is whole, an elided tool result keeping a long excerpt, or one pointer line per
dropped run. The fresh tail is whole groups.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.steps import selection
from compaction.steps.selection import fresh_tail_start, newest_group_start, spans, spans_from_end
from compaction.tokens import TokenCounter
from compaction.toolpairs import SYSTEM_ROLES, group_messages, is_derived, validate_outgoing
from compaction.types import Message
from compaction.view import truncate
from compaction.view.elision import MARK, RecallNames
from compaction.view.entry import Entry, last_user_index
from compaction.view.plan import Plan, SystemMessage, build_plan, raw_entries
from compaction.view.truncate import fit
from config.errors import InvalidRequestError
from tests.compaction.conftest import MODEL, asst, tool, user

COUNTER = TokenCounter.for_model(MODEL)
WORDS = st.sampled_from(["order", "4711", "refund", "the", "file", "src/app.py", "ok", "deadline",
                         "2024-05-01", "naïve", "東京", "{", "}", "\n"])


def text(max_words: int) -> st.SearchStrategy[str]:
    return st.lists(WORDS, min_size=1, max_size=max_words).map(" ".join)


@st.composite
def turn(draw: st.DrawFn, index: int) -> list[dict[str, Any]]:
    msgs = [user(draw(text(40)))]
    if draw(st.booleans()):
        msgs[0]["pinned"] = True
    for r in range(draw(st.integers(0, 3))):
        ids = [f"call_{index}_{r}_{k}" for k in range(draw(st.integers(1, 3)))]
        msgs.append(asst(draw(st.one_of(st.none(), text(10))), ids))
        results = [tool(i, draw(st.one_of(text(30), text(3).map(lambda t: t * 400)))) for i in ids]
        msgs.extend(draw(st.permutations(results)))
    if draw(st.booleans()):
        msgs.append(asst(draw(text(30))))
    return msgs


@st.composite
def conversation(draw: st.DrawFn) -> list[dict[str, Any]]:
    msgs: list[Message] = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": draw(text(60))})
    for i in range(draw(st.integers(1, 8))):
        msgs.extend(draw(turn(i)))
        if draw(st.integers(0, 9)) == 0:
            msgs.append({"role": "developer", "content": draw(text(10))})
    if msgs[-1]["role"] == "assistant" and msgs[-1].get("tool_calls") is None:
        msgs.append(user(draw(text(20))))
    return msgs


def _plan_inputs(msgs: list[Message], summarize_first: int) -> tuple[list[SystemMessage], list[Entry]]:
    clean = [{k: v for k, v in m.items() if k != "pinned"} for m in msgs]
    system = [SystemMessage(m, COUNTER.count_message(m), str(i), i)
              for i, m in enumerate(clean) if m["role"] in SYSTEM_ROLES]
    rows = [(m, i, i, COUNTER.count_message(m), bool(msgs[i].get("pinned"))) for i, m in enumerate(clean)]
    entries = raw_entries(rows)
    cut = _group_boundary(entries, summarize_first)
    if cut:
        summary = Entry("summary", "sum_000000000001", 0, "summary", -100, entries[cut - 1].seq, 0)
        entries = [summary, *entries[cut:]]
    return system, entries


def _group_boundary(entries: list[Entry], n: int) -> int:
    last_user = last_user_index(entries)
    n = min(n, last_user if last_user is not None else len(entries) - 1)
    while 0 < n < len(entries) and entries[n].group == entries[n - 1].group:
        n -= 1
    return n


SUMMARY_MSG = {"role": "system", "content": "<ctxproxy:summary id=\"sum_000000000001\">earlier</...>"}


def _render(clean: list[dict[str, Any]]) -> Any:
    def render(entry: Entry) -> dict[str, Any]:
        return SUMMARY_MSG if entry.kind == "summary" else clean[entry.seq]
    return render


RECALL = RecallNames("context_search", "context_expand")


def _fit(plan: Plan, offered: bool, policy: str) -> Plan:
    messages = plan.budget - plan.tools_tokens
    out, _ = fit(plan, COUNTER, RECALL if offered else None, oversized=messages // 4,
                 tail_share=plan.budget // 2, last_message="truncate" if policy == "truncate" else "reject")
    return out


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversation(), st.integers(300, 6_000), st.integers(0, 400), st.integers(0, 12),
       st.booleans(), st.sampled_from(["reject", "truncate"]))
def test_plan_then_truncate_always_fits_and_stays_valid(msgs: list[Message], budget: int,
                                                       tools_tokens: int, summarize_first: int,
                                                       offered: bool, policy: str) -> None:
    clean = [{k: v for k, v in m.items() if k != "pinned"} for m in msgs]
    system, entries = _plan_inputs(msgs, summarize_first)
    summary_tokens = COUNTER.count_message(SUMMARY_MSG)
    entries = [e if e.kind == "message" else Entry(**{**e.__dict__, "tokens": summary_tokens})
               for e in entries]
    anchors = {"role": "system", "content": "<ctxproxy:anchors>\n- [order] order: 4711\n</ctxproxy:anchors>"}
    plan = build_plan(system, anchors if summarize_first else None, COUNTER.count_message(anchors),
                      entries, _render(clean), tools_tokens=tools_tokens, budget=budget,
                      request_length=len(msgs))
    assert plan.tokens == COUNTER.count_messages(plan.messages) + tools_tokens
    last_user = clean[max(i for i, m in enumerate(msgs) if m["role"] == "user")]
    try:
        out = _fit(plan, offered, policy)
    except InvalidRequestError as exc:
        assert (exc.code, exc.param) == ("context_length_exceeded", "messages")
        _assert_skeleton_cannot_fit(plan, policy)
        return
    forwarded = list(out.messages)
    assert COUNTER.count_messages(forwarded) + tools_tokens <= budget
    validate_outgoing(forwarded, msgs)
    if policy == "reject":
        assert last_user in forwarded  # raw, exactly as sent
    else:
        assert any(is_derived(m, last_user) for m in forwarded)
    assert_no_husks(plan, out)
    if not offered:
        assert all("context_expand" not in str(m.get("content")) for m in forwarded)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversation(), st.integers(100, 6_000), st.integers(0, 12), st.booleans())
def test_dropping_runs_drops_the_fewest_oldest_groups_that_fit(msgs: list[Message], budget: int,
                                                               summarize_first: int, offered: bool) -> None:
    clean = [{k: v for k, v in m.items() if k != "pinned"} for m in msgs]
    system, entries = _plan_inputs(msgs, summarize_first)
    plan = build_plan(system, None, 0, entries, _render(clean), tools_tokens=0, budget=budget,
                      request_length=len(msgs))
    ctx = truncate._Fit(plan, budget, COUNTER, RECALL if offered else None, budget // 4, budget // 2)
    slots = list(plan.slots)
    order = list(dict.fromkeys(s.group for s in slots if not s.protected))
    outcomes = [truncate._without(ctx, slots, set(order[:k])) for k in range(len(order) + 1)]
    fitting = [k for k, out in enumerate(outcomes) if ctx.over(out) <= 0]
    monotone = fitting == list(range(fitting[0], len(order) + 1)) if fitting else True
    if monotone:  # dropping more never costs more (pointer lines aside): the fewest that fit, exactly
        assert truncate._drop_runs(ctx, slots) == outcomes[fitting[0] if fitting else len(order)]


def assert_no_husks(plan: Plan, out: Plan) -> None:
    """Every forwarded message is an original, a summary/anchor block, one pointer line per dropped
    run, or an elided message keeping at least the oversized share (the newest group and the last
    user message excepted: they are cut only when nothing else is left to give)."""
    originals = {id(s.message) for s in plan.slots}
    oversized = (plan.budget - plan.tools_tokens) // 4
    newest = plan.slots[-1].group
    slots = list(out.slots)
    for index, slot in enumerate(slots):
        text = str(slot.message.get("content") or "")
        if id(slot.message) in originals:
            continue
        if slot.ref == "pointer":
            assert text.startswith(MARK) and text.count(MARK) == 1
            assert index == 0 or slots[index - 1].ref != "pointer"  # one line per run
            continue
        assert text.count(MARK) == 1, text
        if slot.group != newest and not (slot.protected and slot.message.get("role") == "user"):
            assert slot.tokens >= oversized - 10, (slot.tokens, oversized)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(conversation(), st.integers(1, 40), st.integers(50, 5_000))
def test_the_fresh_tail_is_whole_groups_within_its_share(msgs: list[Message], count: int,
                                                        max_tokens: int) -> None:
    _, entries = _plan_inputs(msgs, 0)
    start = fresh_tail_start(entries, count, max_tokens)
    starts = {span.start for span in spans(entries)}
    assert start in starts  # a group boundary: never half a tool round
    newest = max(starts)
    assert start <= newest  # the newest group, always
    if start < newest:
        tail = entries[start:]
        assert len(tail) <= count and sum(e.tokens for e in tail) <= max_tokens
    groups = group_messages([m for m in msgs if m["role"] not in SYSTEM_ROLES])
    assert len(spans(entries)) == len(groups)


@given(st.lists(st.integers(0, 3), max_size=30))
def test_spans_are_the_runs_of_equal_groups_whichever_end_they_are_read_from(groups: list[int]) -> None:
    entries = [Entry("message", str(i), 1, "user", group, i) for i, group in enumerate(groups)]
    found = spans(entries)
    assert [e.group for span in found for e in entries[span.start:span.end]] == groups  # a partition
    assert all(found[i].end == found[i + 1].start for i in range(len(found) - 1))
    assert all(len({e.group for e in entries[span.start:span.end]}) == 1 for span in found)
    firsts = [entries[span.start].group for span in found]
    assert all(a != b for a, b in zip(firsts, firsts[1:], strict=False))  # maximal runs
    assert list(spans_from_end(entries)) == found[::-1]
    assert newest_group_start(entries) == (found[-1].start if found else 0)


def _whole_run_leaf_chunks(entries: list[Entry], tail_start: int, min_fanout: int, chunk_tokens: int,
                           keep: frozenset[int]) -> list[tuple[int, ...]]:
    """leaf_chunks as first written: each run of raw groups gathered whole, then cut into chunks."""
    out: list[tuple[int, ...]] = []
    run: list[selection.Span] = []
    for span in spans(entries[:tail_start]):
        if entries[span.start].kind == "summary" or keep.intersection(range(span.start, span.end)):
            out += selection._chunks_of(entries, run, min_fanout, chunk_tokens)
            run = []
        elif not any(e.pinned for e in entries[span.start:span.end]):
            run.append(span)
    return out + list(selection._chunks_of(entries, run, min_fanout, chunk_tokens))


_ENTRY = st.tuples(st.integers(0, 2), st.integers(1, 400), st.sampled_from(["message", "message", "summary"]),
                   st.booleans())


@settings(max_examples=300, deadline=None)
@given(st.lists(_ENTRY, max_size=40), st.integers(0, 40), st.integers(1, 6), st.integers(50, 900),
       st.sets(st.integers(0, 39), max_size=2))
def test_leaf_chunks_found_lazily_are_the_whole_runs_chunks(
        shape: list[tuple[int, int, str, bool]], tail: int, fanout: int, cap: int, keep: set[int]) -> None:
    entries: list[Entry] = []
    group = 0
    for i, (step, tokens, kind, pinned) in enumerate(shape):
        group += step > 0
        if kind == "summary":
            entries.append(Entry("summary", str(i), tokens, "summary", group, i))
        else:
            entries.append(Entry("message", str(i), tokens, "user", group, i, pinned=pinned and step == 2))
    tail = min(tail, len(entries))
    lazy = list(selection.leaf_chunks(entries, tail, fanout, cap, keep=frozenset(keep)))
    assert lazy == _whole_run_leaf_chunks(entries, tail, fanout, cap, frozenset(keep))


def _assert_skeleton_cannot_fit(plan: Plan, policy: str) -> None:
    """Only a protected skeleton bigger than the budget may be refused: with `reject`, the last user
    message kept raw and everything else bare; with `truncate`, every protected message bare."""
    protected = [s.message for s in plan.slots if s.protected]
    raw_user = policy == "reject"
    bare = [m if raw_user and m.get("role") == "user" else {**m, "content": ""} for m in protected]
    assert COUNTER.count_messages(bare) + plan.tools_tokens > plan.budget - 60 * len(bare)


def test_uncompacted_plan_is_the_request_itself() -> None:
    msgs = [user("a"), {"role": "system", "content": "mid"}, asst("b"), user("c")]
    system, entries = _plan_inputs(msgs, 0)
    plan = build_plan(system, None, 0, entries, _render(msgs), tools_tokens=0, budget=10_000,
                      request_length=len(msgs))
    assert list(plan.messages) == msgs
    assert plan.summary_ids == ()
    assert plan.occupancy.used == plan.tokens
