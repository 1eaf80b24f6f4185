"""The generator is deterministic and plants every fact kind the seeds name, early and verbatim."""

from __future__ import annotations

import json
from pathlib import Path

from bench.generator import generate_conversation, generate_suite
from compaction.tokens import TokenCounter
from replay.checks import context_text, pairing_violations
from replay.records import RecordedConversation, read_jsonl, write_jsonl

KINDS = {"name", "order", "amount_currency", "amount_unit", "deadline", "path", "ticket", "correction",
         "approval", "discarded_hypothesis", "decision"}


def test_same_seed_same_conversation_other_seed_differs() -> None:
    a, b, c = generate_conversation(11), generate_conversation(11), generate_conversation(12)
    assert a.to_dict() == b.to_dict()
    assert a.messages != c.messages
    assert [x.to_dict() for x in generate_suite(2, seed=3, n_turns=30, target_tokens=8_000)] == \
           [x.to_dict() for x in generate_suite(2, seed=3, n_turns=30, target_tokens=8_000)]


def test_every_kind_is_planted_verbatim_before_the_last_third() -> None:
    conv = generate_conversation(5)
    assert {c.kind for c in conv.checks} == KINDS
    cut = len(conv.messages) * 2 // 3
    early, late = context_text(conv.messages[:cut]), context_text(conv.messages[cut:])
    for check in conv.checks:
        assert check.fact in early, check
        assert check.fact not in late, f"{check.fact} is repeated late: retention would be free"
        for value in (*check.stale_values, *check.distractors):
            assert value in early, value


def test_corrections_come_after_the_value_they_supersede() -> None:
    conv = generate_conversation(8)
    text = context_text(conv.messages)
    for check in conv.checks:
        for stale in check.stale_values:
            assert text.index(stale) < text.index(check.fact) or check.kind == "discarded_hypothesis"
    correction = next(c for c in conv.checks if c.kind == "correction")
    assert correction.must_be_current and correction.stale_values


def test_near_identical_path_and_pending_approval_are_present() -> None:
    conv = generate_conversation(9)
    path = next(c for c in conv.checks if c.kind == "path")
    (decoy,) = path.distractors
    assert decoy != path.fact and decoy.rsplit("_v", 1)[0] == path.fact.rsplit("_v", 1)[0]
    approval = next(c for c in conv.checks if c.kind == "approval")
    assert any(approval.fact in str(m.get("content")) and "pending" in str(m.get("content"))
               for m in conv.messages)


def test_shape_tool_rounds_size_and_turns() -> None:
    conv = generate_conversation(4, n_turns=150, target_tokens=40_000)
    counter = TokenCounter.for_model("gpt-4o-mini")
    assert sum(m["role"] == "user" for m in conv.messages) == 150
    assert 32_000 <= counter.count_messages(conv.messages) <= 48_000
    assert pairing_violations(conv.messages) == []
    calls = [m for m in conv.messages if m.get("tool_calls")]
    assert any(len(m["tool_calls"]) > 1 for m in calls), "no parallel tool calls"
    assert max(counter.count_message(m) for m in conv.messages if m["role"] == "tool") >= 1_500
    assert conv.messages[0]["role"] == "system" and conv.messages[-1]["role"] == "assistant"


def test_jsonl_round_trip(tmp_path: Path) -> None:
    suite = generate_suite(2, seed=1, n_turns=20, target_tokens=5_000)
    path = tmp_path / "c.jsonl"
    write_jsonl(path, suite)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert set(json.loads(lines[0])) == {"id", "messages", "tools", "checks"}
    assert read_jsonl(path) == suite
    assert isinstance(suite[0], RecordedConversation)
