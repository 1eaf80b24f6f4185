"""Back-referenced tool results kept, and needed facts kept, on the real sessions.

`python -m bench.backrefs [--sessions a,b] [--markers]` replays each real session through the real
engine (local/extractive, window = a quarter of the session, as `make eval`'s real set) and counts,
at every request:
- marker references: tool results that are the client's "unchanged since your last Read" note; at
  each request holding one (`markers`; `markers_new`: only the request where it arrives), the
  earlier result it refers to (the newest earlier real output of the
  same call) counts as present only when its text is verbatim in a forwarded message other than the
  marker itself. `--markers` first turns every identical repeat of a file read (Read, read_file,
  view...) into Claude Code's marker ("Wasted call — file unchanged since your last Read. Refer to
  that earlier tool_result instead."), in memory, as Claude Code does for an unchanged file; the
  recorded sessions carry none;
- re-runs: results of a call made again (same tool, same arguments) at the request where the newer
  output arrives; the earlier output counts as present when it, or a newer identical copy, is
  verbatim in the forwarded request (strictly: the earlier message's own text outside the newest
  round is reported beside it);
- needed facts kept (k=1 and k=3 look-ahead, replay/needed_later), over budget, pairing violations.
Nothing is written; the sessions are read from ../shared/real-trajectories.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from bench.eval_figures import score_figures  # noqa: E402
from bench.eval_sets import SetSpec, quarter_window, real_sessions  # noqa: E402
from compaction import back_references, is_unchanged_marker  # noqa: E402
from proxy.cli.replay import quiet_logs  # noqa: E402
from replay.needed_later.evaluate import collector_for  # noqa: E402
from replay.records import RecordedConversation  # noqa: E402
from replay.run import ObservedRequest, ReplayOptions, replay_engine  # noqa: E402
from store.encoding.content import content_text  # noqa: E402

MARKER = "Wasted call — file unchanged since your last Read. Refer to that earlier tool_result instead."
READ_TOOLS = ("Read", "read_file", "view", "str_replace_based_edit_tool", "read")


def with_markers(conv: RecordedConversation) -> tuple[RecordedConversation, int]:
    """`conv` with each identical repeat of a file read replaced by Claude Code's marker."""
    calls: dict[str, tuple[str, str]] = {}
    last: dict[tuple[str, str], str] = {}
    out: list[dict[str, Any]] = []
    made = 0
    for m in conv.messages:
        for c in m.get("tool_calls") or ():
            fn = c.get("function") or {}
            calls[str(c.get("id"))] = (str(fn.get("name")), str(fn.get("arguments")))
        call = calls.get(str(m.get("tool_call_id"))) if m.get("role") == "tool" else None
        if call is not None and call[0] in READ_TOOLS:
            text = content_text(dict(m))
            if last.get(call) == text:
                m = {**m, "content": MARKER}
                made += 1
            else:
                last[call] = text
        out.append(dict(m))
    return replace(conv, messages=tuple(out)), made


@dataclass
class Counts:
    markers: int = 0  # (request, marker) pairs with a referenced earlier result
    markers_present: int = 0
    markers_new: int = 0  # the same, only at the request where the marker arrives (newest round)
    markers_new_present: int = 0
    reruns: int = 0  # re-made calls, at the request where the newer output arrives
    reruns_present: int = 0  # the earlier output or a newer identical copy verbatim
    reruns_strict: int = 0  # the earlier output verbatim outside the newest round


class BackrefObserver:
    """Counts back-referenced results present in each forwarded request."""

    def __init__(self, conv: RecordedConversation, inner: Any) -> None:
        self.conv, self.inner, self.counts = conv, inner, Counts()

    def __call__(self, seen: ObservedRequest) -> None:
        self.inner(seen)
        history = list(self.conv.messages[:seen.point])
        refs = back_references(enumerate(history))
        last_assistant = max((i for i, m in enumerate(history) if m.get("role") == "assistant"), default=-1)
        texts = [content_text(dict(m)) for m in seen.forwarded]
        for marker, target in refs.pointed.items():
            if target not in refs.referenced:
                continue
            wanted = content_text(dict(history[target]))
            present = any(wanted in t and not is_unchanged_marker(t) for t in texts)
            self.counts.markers += 1
            self.counts.markers_present += present
            if marker > last_assistant:
                self.counts.markers_new += 1
                self.counts.markers_new_present += present
        newest = {i for i in range(last_assistant + 1, len(history))}
        for older, newer in refs.superseded.items():
            if newer not in newest:
                continue
            self.counts.reruns += 1
            wanted = content_text(dict(history[older]))
            self.counts.reruns_present += any(wanted in t for t in texts)
            newest_texts = {content_text(dict(history[i])) for i in newest}
            self.counts.reruns_strict += any(wanted in t for t in texts if t not in newest_texts)


async def measure(conv: RecordedConversation, model: str) -> dict[str, Any]:
    options = ReplayOptions(model=model, window=quarter_window(conv, model))
    collector = collector_for(conv, options, contrast=False)
    observer = BackrefObserver(conv, collector)
    report = await replay_engine(conv, options, observer=observer)
    figures = score_figures(collector.scores)
    return {"session": conv.id, "k1": f"{figures['k1_kept']}/{figures['k1_needed']}",
            "k3": f"{figures['k3_kept']}/{figures['k3_needed']}",
            "over_budget": report.over_budget, "pairing": report.pairing_violations,
            **vars(observer.counts)}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.backrefs",
                                description=(__doc__ or "").splitlines()[0])
    p.add_argument("--sessions", default="", help="comma-separated substrings of session ids (default all)")
    p.add_argument("--markers", action="store_true", help="identical re-reads become Claude Code's marker")
    args = p.parse_args(argv)
    quiet_logs()
    model = SetSpec().model
    wanted = [s for s in args.sessions.split(",") if s]
    totals: dict[str, int] = {}
    for conv in real_sessions():
        if wanted and not any(w in conv.id for w in wanted):
            continue
        made = 0
        if args.markers:
            conv, made = with_markers(conv)
        row = asyncio.run(measure(conv, model))
        row["markers_made"] = made
        print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
        for k, v in row.items():
            if isinstance(v, int):
                totals[k] = totals.get(k, 0) + v
            elif k in ("k1", "k3"):
                kept, needed = map(int, str(v).split("/"))
                totals[k + "_kept"] = totals.get(k + "_kept", 0) + kept
                totals[k + "_needed"] = totals.get(k + "_needed", 0) + needed
    print("total " + " ".join(f"{k}={v}" for k, v in totals.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
