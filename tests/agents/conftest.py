"""The agent CLI suite runs only when asked (`make test-agents` sets CTXPROXY_AGENTS=1), not in `pytest`.

The checks of the scripted provider itself (test_validate.py) run always.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.agents.clis import AGENTS_DIR

ENABLED = os.environ.get("CTXPROXY_AGENTS") == "1"
collect_ignore = [] if ENABLED else ["test_agents.py"]
STARTED = time.time()
COLUMNS = ("cli", "exit", "seconds", "loop_requests", "compacted", "conversations", "max_tokens_received",
           "window", "overhead_p50_ms", "replayed_p50_ms", "early_forwards", "outside")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line of figures per agent session of this run (from .agents/results/<cli>.json)."""
    if not ENABLED:
        return
    rows = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((AGENTS_DIR / "results").glob("*.json"))
            if p.stat().st_mtime >= STARTED]
    if not rows:
        return
    terminalreporter.section("agent sessions")
    terminalreporter.write_line("  ".join(COLUMNS))
    for row in rows:
        terminalreporter.write_line("  ".join(str(row.get(c)) for c in COLUMNS))
