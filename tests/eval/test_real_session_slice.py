"""A short slice of a real agent session through the real engine and the needed-later measure.

Reads ../shared/real-trajectories beside the checkout (CI lays it there too; the test is skipped,
saying why, where it is absent). Nothing is copied from it.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from bench.eval_sets import REAL_SESSIONS, quarter_window
from replay.needed_later.evaluate import run_baseline, run_engine
from replay.needed_later.scoring import retention
from replay.run import ReplayOptions
from replay.trajectory import read_recorded

SESSION = REAL_SESSIONS / "cc-ae4a77f8.jsonl"  # short user messages, a long tool loop
SLICE = 60  # messages: about 29 requests

pytestmark = pytest.mark.skipif(not SESSION.is_file(),
                                reason=f"real sessions not on this machine ({SESSION} absent)")


def test_a_real_session_slice_through_the_engine_keeps_every_guarantee() -> None:
    (conv,) = read_recorded(Path(SESSION))
    end = max(i for i in range(SLICE) if conv.messages[i]["role"] == "assistant")
    part = replace(conv, messages=conv.messages[:end + 1])
    options = ReplayOptions(window=quarter_window(part, "gpt-4o-mini"))
    engine = asyncio.run(run_engine(part, options, "ctxproxy"))
    full = run_baseline(part, "passthrough", options)
    report = engine.report
    assert report.errors == () and report.over_budget == 0 and report.pairing_violations == 0
    assert report.invented == ()
    assert sum(s.over_window for s in engine.scores) > 5
    assert retention(full.scores, 1).mean == 1.0 and retention(full.scores, 1).needed > 20
    kept = retention(engine.scores, 3)
    assert kept.mean is not None and 0 < kept.mean <= 1 and kept.needed == retention(full.scores, 3).needed
    assert sum(engine.steps.values()) > 0  # the window forced compaction steps, read from the store
