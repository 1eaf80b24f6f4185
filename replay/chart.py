"""PNG chart of `ctxproxy replay`: forwarded tokens per request (matplotlib, Agg backend: no display).

matplotlib is an optional extra (`pip install 'ctxproxy[charts]'`): a default install has none, so
it is imported only when a chart is drawn, and `require_charts` says how to get it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from config.errors import ConfigError
from replay.report import ConversationReport

CHARTS_MISSING = ("charts need matplotlib, which a default install leaves out: "
                  "pip install 'ctxproxy[charts]'")

CATEGORIES = ("system", "anchors", "summaries", "fresh_tail", "tools")
COLORS = ("#4c72b0", "#dd8452", "#55a868", "#8172b3", "#937860")


def _turn_axes(ax: Any, report: ConversationReport) -> None:
    """One conversation: stacked occupancy (engine) or forwarded tokens (baseline), history, budget."""
    x = list(range(1, len(report.requests) + 1))
    if report.turns:
        stacks = [[t.occupancy.get(c, 0) for t in report.turns] for c in CATEGORIES]
        ax.stackplot(x, stacks, labels=[c.replace("_", " ") for c in CATEGORIES], colors=COLORS,
                     alpha=0.85)
    else:
        ax.plot(x, [r.tokens_forwarded for r in report.requests], label="forwarded", color=COLORS[0])
    ax.plot(x, [r.tokens_received for r in report.requests], label="received (full history)",
            color="black", linestyle=":")
    ax.plot(x, [r.budget for r in report.requests], label="budget", color="red", linestyle="--")
    ax.set_title(f"{report.conversation_id} ({report.strategy})")
    ax.set_xlabel("request")
    ax.set_ylabel("tokens")
    ax.set_ylim(0, max(r.budget for r in report.requests) * 1.6 if report.requests else 1)
    ax.legend(loc="upper left", fontsize="small")


def require_charts() -> None:
    """Raise ConfigError (with the install command) when matplotlib is not installed."""
    if importlib.util.find_spec("matplotlib") is None:
        raise ConfigError(CHARTS_MISSING, code="charts_unavailable")


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display), imported on first use."""
    require_charts()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def turn_chart(reports: Sequence[ConversationReport], path: Path) -> Path:
    """Forwarded tokens per request by occupancy category, with the full history and the budget."""
    plt = pyplot()
    fig, axes = plt.subplots(len(reports), 1, figsize=(11, 4 * max(1, len(reports))), squeeze=False)
    for ax, report in zip(axes[:, 0], reports, strict=True):
        _turn_axes(ax, report)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
