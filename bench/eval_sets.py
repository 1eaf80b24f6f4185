"""The conversation sets `make eval` replays, each with its window rule and strategies.

- `real`: the real agent sessions of ../shared/real-trajectories (read from there, never
  copied), window = a quarter of each session's tokens;
- `loops`: the agent-loop generator (bench/agentloop), one conversation per language, same rule;
- `planted`: the planted-fact generator (bench/generator.py) at a fixed 12,000-token window.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from bench.agentloop.build import generate_loop_suite
from bench.generator import generate_suite
from compaction import TokenCounter
from replay.records import RecordedConversation
from replay.run import ReplayOptions
from replay.trajectory import read_recorded

SetName = Literal["real", "loops", "planted"]
# ../shared/real-trajectories beside the checkout (CI lays shared/ there too), or the env override.
REAL_SESSIONS = Path(os.environ.get("CTXPROXY_REAL_TRAJECTORIES",
                                    Path(__file__).resolve().parents[2] / "shared" / "real-trajectories"))
WINDOW_SHARE = 4  # window = 1/4 of a conversation's tokens (real sessions and agent loops)
CTXPROXY = "ctxproxy"
ENGINE_FAKES: dict[SetName, tuple[str, ...]] = {
    "real": ("half-failing", "half-garbage"),
    "loops": ("half-failing", "half-garbage"),
    "planted": ("half-failing", "half-garbage", "inventing", "failing"),
}
BASELINES: dict[SetName, tuple[str, ...]] = {
    "real": ("passthrough", "sliding_window"),
    "loops": ("passthrough", "sliding_window"),
    "planted": ("passthrough", "sliding_window"),
}


@dataclass(frozen=True)
class Job:
    """One strategy over one conversation of one set."""

    set_name: SetName
    conv: RecordedConversation
    strategy: str  # a baseline name, `ctxproxy` or `ctxproxy+<fake summarizer>`
    options: ReplayOptions


@dataclass(frozen=True)
class SetSpec:
    """How big the generated sets are."""

    seed: int = 7
    loop_tokens: int = 36_000
    planted_conversations: int = 2
    planted_turns: int = 150
    planted_tokens: int = 40_000
    planted_window: int = 12_000
    model: str = "gpt-4o-mini"


def strategies(set_name: SetName) -> list[str]:
    """Every strategy a set runs: ctxproxy, ctxproxy with each fake summarizer, the baselines."""
    return [CTXPROXY, *(f"{CTXPROXY}+{f}" for f in ENGINE_FAKES[set_name]), *BASELINES[set_name]]


def quarter_window(conv: RecordedConversation, model: str) -> int:
    """A quarter of the conversation's tokens (messages, framing and the client's tools)."""
    counter = TokenCounter.for_model(model)
    return (counter.count_messages(conv.messages) + counter.count_tools(list(conv.tools))) // WINDOW_SHARE


def real_sessions(directory: Path = REAL_SESSIONS) -> list[RecordedConversation]:
    """The real sessions, one per file (none when the directory is absent)."""
    return [c for path in sorted(directory.glob("*.jsonl")) for c in read_recorded(path)]


def conversations(spec: SetSpec, sets: Sequence[SetName]) -> dict[SetName, list[RecordedConversation]]:
    """The conversations of each requested set."""
    out: dict[SetName, list[RecordedConversation]] = {}
    if "real" in sets:
        out["real"] = real_sessions()
    if "loops" in sets:
        out["loops"] = generate_loop_suite(spec.seed, target_tokens=spec.loop_tokens)
    if "planted" in sets:
        out["planted"] = generate_suite(spec.planted_conversations, spec.seed, spec.planted_turns,
                                        spec.planted_tokens)
    return out


def jobs_for(spec: SetSpec, convs: dict[SetName, list[RecordedConversation]]) -> list[Job]:
    """Every (set, conversation, strategy) job, each with its set's window rule."""
    base = ReplayOptions(model=spec.model)
    jobs: list[Job] = []
    for set_name, items in convs.items():
        for conv in items:
            window = spec.planted_window if set_name == "planted" else quarter_window(conv, spec.model)
            options = replace(base, window=window)
            jobs += [Job(set_name, conv, s, options) for s in strategies(set_name)]
    return jobs
