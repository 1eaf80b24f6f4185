"""The agent-loop generator: deterministic, agent-loop shaped, facts planted early and used late."""

from __future__ import annotations

import pytest

from bench.agentloop.build import generate_loop, generate_loop_suite
from bench.agentloop.facts import draw_facts
from compaction.tokens import TokenCounter
from replay.checks import context_text, pairing_violations
from replay.needed_later.identifiers import IdentifierExtractor
from replay.needed_later.needed import NeededIndex
from replay.records import RecordedConversation
from replay.run import request_points

SUITE = generate_loop_suite(3, target_tokens=20_000)
KINDS = {"suffixed_id", "commit", "account", "version", "exception", "command", "path", "amount",
         "migration", "endpoint"}


def test_same_seed_same_conversations_other_seed_differs() -> None:
    again = generate_loop_suite(3, target_tokens=20_000)
    assert [c.to_dict() for c in SUITE] == [c.to_dict() for c in again]
    assert generate_loop(4, "en", 20_000).messages != SUITE[0].messages


def test_agent_loop_shape_one_to_three_users_long_tool_outputs() -> None:
    counter = TokenCounter.for_model("gpt-4o-mini")
    for conv in SUITE:
        roles = [m["role"] for m in conv.messages]
        assert 1 <= roles.count("user") <= 3 and roles.count("tool") >= 30
        assert pairing_violations(list(conv.messages)) == []
        tool_tokens = sum(counter.count_message(m) for m in conv.messages if m["role"] == "tool")
        assert tool_tokens > 0.7 * counter.count_messages(conv.messages)


@pytest.mark.parametrize(("language", "marks"), [("pt", "çãé"), ("zh", "的请"), ("ja", "ます")])
def test_portuguese_and_cjk_text(language: str, marks: str) -> None:
    conv = next(c for c in SUITE if c.id.startswith(f"loop-{language}-"))
    text = context_text(conv.messages)
    assert any(mark in text for mark in marks)


def _check_fact_life(conv: RecordedConversation) -> None:
    points = set(request_points(conv.messages))
    for check in conv.checks:
        assert check.used_at is not None and check.used_at in points
        before = context_text(conv.messages[:check.used_at])
        assert before.count(check.fact) == 1, (conv.id, check.fact)  # planted once, never repeated
        first = next(i for i, m in enumerate(conv.messages) if check.fact in context_text([m]))
        assert first < len(conv.messages) * 0.5 and check.used_at >= len(conv.messages) * 0.6
        assert check.fact in context_text([conv.messages[check.used_at]])
        assert all(d in before for d in check.distractors)


def test_every_fact_kind_is_planted_once_early_and_used_much_later() -> None:
    for conv in SUITE:
        assert {c.kind for c in conv.checks} == KINDS
        _check_fact_life(conv)


def test_fact_shapes_and_decoys() -> None:
    import random

    facts = {f.kind: f for f in draw_facts(random.Random(11))}
    assert facts["suffixed_id"].value[:-1] == (facts["suffixed_id"].decoy or "")[:-1]
    assert facts["commit"].value[:7] == (facts["commit"].decoy or "")[:7] != facts["commit"].value
    real, decoy = facts["path"].value, facts["path"].decoy or ""
    assert len({real, decoy}) == 2 and abs(len(real) - len(decoy)) == 1
    assert facts["exception"].value.startswith("KeyError: '")


def test_the_measure_sees_the_late_uses_as_needed() -> None:
    conv = SUITE[0]
    index = NeededIndex(conv.messages, conv.tools, IdentifierExtractor())
    needed = {i.ident for c in conv.checks if c.used_at is not None for i in index.needs(c.used_at).select(1)}
    by_kind = {c.kind: c.fact for c in conv.checks}
    assert {by_kind["path"], by_kind["commit"], by_kind["suffixed_id"], by_kind["version"]} <= needed
