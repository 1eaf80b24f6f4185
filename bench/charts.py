"""PNG chart of the eval's headline: retention of what the agent needed later, per real session and
strategy (matplotlib, Agg backend: no display needed).

Per-request charts are the product's (`replay.chart.turn_chart`, behind `ctxproxy replay --chart`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from replay.chart import COLORS, pyplot


def retention_chart(rows: Sequence[Mapping[str, Any]], path: Path, set_name: str = "real") -> Path:
    """Grouped bars: retention at k=1 and k=3 per conversation of `set_name`, one bar per strategy."""
    plt = pyplot()
    chosen = [r for r in rows if r["set"] == set_name and r["strategy"] != "passthrough"]
    convs = list(dict.fromkeys(r["conversation"] for r in chosen))
    strategies = list(dict.fromkeys(r["strategy"] for r in chosen))
    by_key = {(r["conversation"], r["strategy"]): r for r in chosen}
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), sharey=True)
    width = 0.8 / max(1, len(strategies))
    for ax, k in zip(axes, (1, 3), strict=True):
        for i, name in enumerate(strategies):
            values = [100 * float((by_key.get((c, name)) or {}).get(f"k{k}") or 0) for c in convs]
            ax.bar([x + i * width for x in range(len(convs))], values, width, label=name,
                   color=COLORS[i % len(COLORS)])
        ax.set_xticks([x + width * (len(strategies) - 1) / 2 for x in range(len(convs))],
                      [c[:18] for c in convs], rotation=15, fontsize="small")
        ax.set_title(f"needed identifiers kept, look-ahead k={k} (%)")
        ax.set_ylim(50, 100)
    axes[0].legend(fontsize="small", loc="lower left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
