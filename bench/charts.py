"""PNG chart of the eval's strategy comparison (matplotlib, Agg backend: no display needed).

Per-request charts are the product's (`replay.chart.turn_chart`, behind `ctxproxy replay --chart`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from replay.chart import COLORS  # noqa: E402


def comparison_chart(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Facts retained and requests over budget per strategy (the eval's headline)."""
    names = [str(r["strategy"]) for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5))
    left.barh(names, [100 * float(r["facts_retained"]) for r in rows], color=COLORS[2])
    left.set_xlabel("planted facts in the final forwarded context (%)")
    left.set_xlim(0, 100)
    right.barh(names, [int(r["over_budget"]) for r in rows], color=COLORS[1], label="over budget")
    over = [int(r["over_budget"]) for r in rows]
    right.barh(names, [int(r["pairing_violations"]) for r in rows], left=over, color=COLORS[3],
               label="tool-pairing violations")
    right.set_xlabel("requests over budget + tool-pairing violations")
    right.legend(fontsize="small")
    left.invert_yaxis()
    right.invert_yaxis()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
