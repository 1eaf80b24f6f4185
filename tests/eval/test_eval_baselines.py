"""Baselines behave as documented: passthrough overflows, windows drop early facts."""

from __future__ import annotations

from bench.generator import generate_conversation
from compaction.tokens import TokenCounter
from replay.baselines import passthrough, sliding_window, trim_messages
from replay.checks import context_text, pairing_violations

COUNTER = TokenCounter.for_model("gpt-4o-mini")
CONV = generate_conversation(21, n_turns=60, target_tokens=16_000)
HISTORY = list(CONV.messages)
BUDGET = 4_000


def test_passthrough_forwards_everything_and_exceeds_the_budget() -> None:
    out = passthrough(HISTORY, BUDGET, COUNTER)
    assert out == HISTORY
    assert COUNTER.count_messages(out) > BUDGET


def test_sliding_window_fits_keeps_system_and_drops_every_early_fact() -> None:
    out = sliding_window(HISTORY, BUDGET, COUNTER)
    assert COUNTER.count_messages(out) <= BUDGET
    assert out[0] == HISTORY[0] and out[-1] == HISTORY[-1]
    text = context_text(out)
    early = [c for c in CONV.checks if c.kind in ("name", "order", "ticket", "deadline", "amount_currency")]
    assert early and all(c.fact not in text for c in early)


def test_sliding_window_never_cuts_a_tool_round() -> None:
    ends = [k for k in range(10, len(HISTORY)) if not pairing_violations(HISTORY[:k])]
    windows = [sliding_window(HISTORY[:k], 1_500, COUNTER) for k in ends]
    assert any(len(w) < k for w, k in zip(windows, ends, strict=True))
    assert [w for w in windows if pairing_violations(w)] == []


def test_trim_messages_is_litellm_and_loses_early_facts() -> None:
    out = trim_messages(HISTORY, BUDGET, COUNTER)
    assert len(out) < len(HISTORY)
    assert CONV.checks[1].fact not in context_text(out)  # the order number
