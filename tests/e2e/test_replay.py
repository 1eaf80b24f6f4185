"""End to end: a 150-turn agentic conversation replayed through the proxy never goes over
budget, keeps tool pairs and planted facts, shows corrected values as current, and never forwards
what an adversarial summarizer invented. Figures for the product owner are printed (pytest -s) and
written to JSON, next to a sliding window's and litellm's trim_messages' on the same budget.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compaction.toolpairs import pairing_violations
from replay import baselines
from tests.e2e.conftest import RigFactory
from tests.e2e.conversation import STALE_BUDGET, Conversation, generate
from tests.e2e.harness import (
    INVENTED_FACTS,
    MODEL,
    CachedCounter,
    Figures,
    Replay,
    anchor_block,
    body,
    budget_for,
    context_text,
    figures,
    replay,
    request_tokens,
)

BUDGET = budget_for()


@pytest.fixture(scope="module")
def conversation() -> Conversation:
    return generate(turns=150, seed=7)


@pytest.fixture(scope="module")
def counter() -> CachedCounter:
    return CachedCounter(MODEL)


@pytest.fixture(scope="session")
def figures_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory for every figures file of the session (printed with the figures)."""
    path = tmp_path_factory.getbasetemp() / "e2e_figures"
    path.mkdir(exist_ok=True)
    return path


def assert_every_request_fits(result: Replay, counter: CachedCounter, turns: int) -> None:
    assert len(result.forwarded) == turns  # one upstream request per turn: no recall round-trips
    for index, (forwarded, prepared) in enumerate(zip(result.forwarded, result.prepared, strict=True)):
        tokens = request_tokens(counter, forwarded)
        assert tokens <= BUDGET, f"turn {index}: {tokens} > {BUDGET}"
        # the engine counts exactly what it forwards: recall tools only on turns that carry them
        assert tokens == prepared.tokens_forwarded, f"turn {index}: {tokens} != engine's count"
        assert pairing_violations(forwarded["messages"]) == [], f"turn {index}"
        assert forwarded["messages"][-1] == result.received[index]["messages"][-1]


def assert_facts_kept(result: Replay, conv: Conversation) -> None:
    final = result.forwarded[-1]["messages"]
    text = context_text(final)
    missing = {k: v for k, v in conv.facts.items() if v not in text}
    assert not missing, f"planted facts missing from the final forwarded context: {missing}"
    block = anchor_block(final)
    assert block is not None, "the final context is compacted, so it carries an anchor block"
    budget_lines = [line for line in block.splitlines() if "$5,200" in line or STALE_BUDGET in line]
    assert budget_lines and all("$5,200" in line for line in budget_lines), budget_lines
    assert STALE_BUDGET not in block  # the superseded value is never presented as current


def assert_nothing_invented(result: Replay) -> None:
    for index, forwarded in enumerate(result.forwarded):
        text = context_text(forwarded["messages"])
        leaked = [f for f in INVENTED_FACTS if f in text]
        assert not leaked, f"turn {index} forwarded invented facts {leaked}"


def sliding_window_figures(result: Replay, conv: Conversation, counter: CachedCounter) -> Figures:
    """A sliding window (whole tool rounds, newest first) over the very same client requests."""
    tools = list(conv.tools)
    tools_tokens = counter.count_tools(tools)
    forwarded = [body(baselines.sliding_window(r["messages"], BUDGET, counter, tools_tokens), tools)
                 for r in result.received]
    return figures("sliding_window", result.received, forwarded, conv.facts, BUDGET, counter)


def report(all_figures: list[Figures], path: Path) -> None:
    rows = [f.as_dict() for f in all_figures]
    path.write_text(json.dumps({"budget": BUDGET, "window": 12_000, "strategies": rows}, indent=2))
    print(f"\n[e2e figures] written to {path}")
    for f in all_figures:
        print(f"  {f.strategy:>15}: ratio final {f.ratio_final:>6} mean {f.ratio_mean:>6} | prefix "
              f"stable {f.prefix_stability:>5} | summarizer calls/turn {f.summarizer_calls_per_turn:>5}"
              f" | max tokens {f.max_forwarded_tokens} over budget {f.over_budget_requests} | "
              f"pairing violations {f.pairing_violations} | facts kept {len(f.facts_kept)}/"
              f"{len(f.facts_kept) + len(f.facts_lost)} lost {list(f.facts_lost)}")


async def test_150_turn_replay_fits_keeps_facts_and_reports(
        rig: RigFactory, conversation: Conversation, counter: CachedCounter, figures_dir: Path) -> None:
    r = await rig("faithful")
    result = await replay(r.client, conversation, r.model, r.engine)
    result.summarizer_calls = len(r.summarizer.requests)
    assert_every_request_fits(result, counter, len(conversation.steps))
    assert_facts_kept(result, conversation)
    assert any(p.summary_ids for p in result.prepared)  # it really compacted
    ours = figures("ctxproxy", result.received, result.forwarded, conversation.facts, BUDGET, counter,
                   result.summarizer_calls)
    assert ours.facts_lost == () and ours.over_budget_requests == 0
    window = sliding_window_figures(result, conversation, counter)
    assert window.over_budget_requests == 0 and window.pairing_violations == 0
    report([ours, window], figures_dir / "ctxproxy_vs_sliding_window.json")


@pytest.mark.parametrize("behaviour", ["inventing", "empty", "verbose"])
async def test_adversarial_summarizer_never_leaks_and_still_fits(
        rig: RigFactory, conversation: Conversation, counter: CachedCounter, behaviour: str,
        figures_dir: Path) -> None:
    r = await rig(behaviour)
    result = await replay(r.client, conversation, r.model, r.engine)
    assert r.summarizer.requests, "the adversarial summarizer was really called"
    assert_every_request_fits(result, counter, len(conversation.steps))
    assert_nothing_invented(result)
    assert_facts_kept(result, conversation)
    ours = figures(f"ctxproxy/{behaviour}", result.received, result.forwarded, conversation.facts,
                   BUDGET, counter, len(r.summarizer.requests))
    report([ours], figures_dir / f"ctxproxy_{behaviour}_summariser.json")


