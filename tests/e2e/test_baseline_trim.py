"""litellm's trim_messages on the same conversation and budget as the proxy replay (figures only).

trim_messages is slow on long histories (seconds per call), so it runs on sampled consecutive turn
pairs late in the conversation plus the final turn; the printed figures say so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay import baselines
from tests.e2e.conversation import generate, request_history
from tests.e2e.harness import MODEL, CachedCounter, body, budget_for, figures

BUDGET = budget_for()
SAMPLED_PAIRS = ((99, 100), (119, 120), (139, 140), (148, 149))


@pytest.fixture(scope="session")
def figures_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.getbasetemp() / "e2e_figures"
    path.mkdir(exist_ok=True)
    return path


def test_trim_messages_loses_early_facts_and_breaks_tool_pairs(figures_dir: Path) -> None:
    conv = generate(turns=150, seed=7)
    counter = CachedCounter(MODEL)
    tools = list(conv.tools)
    budget = BUDGET - counter.count_tools(tools)  # trim_messages only sees messages
    received, forwarded = [], []
    for turn in [t for pair in SAMPLED_PAIRS for t in pair]:
        history = request_history(conv, turn)
        received.append(body(history, tools))
        forwarded.append(body(baselines.trim_messages(history, budget, counter, MODEL), tools))
    got = figures("trim_messages", received, forwarded, conv.facts, BUDGET, counter)
    # prefix stability over the sampled pairs only (not over the gaps between them)
    pairs = [forwarded[i]["messages"] == forwarded[i + 1]["messages"][:len(forwarded[i]["messages"])]
             for i in range(0, len(forwarded), 2)]
    stability = round(sum(pairs) / len(pairs), 3)
    row = {**got.as_dict(), "prefix_stability": stability, "sampled_turns": list(SAMPLED_PAIRS)}
    (figures_dir / "trim_messages.json").write_text(json.dumps({"budget": BUDGET, "strategies": [row]},
                                                               indent=2))
    print(f"\n[e2e figures] trim_messages (turn pairs {SAMPLED_PAIRS}): ratio final {got.ratio_final} "
          f"mean {got.ratio_mean} | prefix stable {stability} | max tokens {got.max_forwarded_tokens} "
          f"over budget {got.over_budget_requests} | pairing violations {got.pairing_violations} | "
          f"facts kept {len(got.facts_kept)}/{len(conv.facts)} -> {figures_dir}")
    # The comparison the product is built on: a plain trim keeps none of the early facts.
    assert got.facts_lost == tuple(conv.facts)
