"""The verifier's calibration: false rejections of faithful summaries, catches of invented facts.

`python -m bench.verifier_eval [--json out.json]` builds a labelled corpus and runs
`compaction.summarize.verify.calibration_rates` over it:
- sources: windows of the real agent sessions (read from ../shared/real-trajectories, never copied;
  skipped when absent) and conversations of bench/generator.py;
- faithful summaries: the local extractive summarizer's output, templated abstractive summaries that
  keep the sources' facts in other words (sentence-start verbs, case changes, reformatted numbers and
  dates, shortened paths), and hand-written summaries of real windows (bench/verifier_corpus.json);
- invented variants of each abstractive summary, one fact each: a changed digit, a changed id
  suffix, a new path, name, URL, date or amount (never a value the sources hold).
Deterministic for a seed. `make eval` can call `run()` and read its report.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from bench.eval_sets import REAL_SESSIONS  # noqa: E402
from bench.facts import PlantedFacts, draw_facts  # noqa: E402
from bench.generator import generate_conversation  # noqa: E402
from compaction import (  # noqa: E402
    CalibrationCase,
    CalibrationReport,
    ExtractiveSummarizer,  # noqa: E402
    build_source_text,  # noqa: E402
    calibration_rates,
)
from store.models import StoredMessage  # noqa: E402

SESSIONS_DIR = REAL_SESSIONS
HANDWRITTEN = Path(__file__).with_name("verifier_corpus.json")
WINDOW = 16  # messages per summarized window of a real session
# Ordinary words a faithful abstractive summary may start a sentence with (written before measuring).
OPENERS = ("Copy", "Text", "Investigated", "Reproduced", "Patched", "Confirmed", "Refactored",
           "Traced", "Narrowed", "Identified", "Outcome", "Remaining", "Afterwards", "Initially",
           "Meanwhile", "Eventually", "Inspection", "Debugging", "Verification", "Cleanup", "Rerun",
           "Rewrote", "Summarised", "Grepped", "Listed", "Compared", "Diffed", "Staged",
           "Committed", "Reverted", "Dropped", "Restored", "Bumped", "Pinned", "Migrated",
           "Renamed", "Extracted", "Inlined", "Simplified", "Hardened", "Documented",
           "Benchmarked", "Profiled", "Flaky", "Green", "Broken", "Stale", "Cached", "Skipped",
           "Root", "Cause", "Symptom", "Workaround", "Caveat", "Progress", "Blocker", "Plan",
           "Goal", "Scope", "Risk", "Status", "Result", "Observed", "Noticed", "Realised",
           "Suspected", "Checked", "Looked", "Opened", "Read", "Edited", "Wrote", "Created",
           "Deleted", "Moved", "Ran", "Tried", "Retried", "Fixed", "Broke", "Validated",
           "Asserted", "Mocked", "Stubbed", "Parametrised", "Parsed", "Serialised", "Logged",
           "Printed", "Captured", "Filtered", "Sorted", "Merged", "Split", "Wrapped", "Unwrapped",
           "Guarded", "Handled", "Raised", "Caught", "Ignored", "Silenced", "Enabled",
           "Disabled", "Configured", "Installed", "Upgraded", "Downgraded", "Vendored",
           "Cloned", "Fetched", "Pulled", "Pushed", "Rebased", "Squashed", "Tagged", "Released")
NEW_NAMES = ("Zelda Quorn", "Marguerite Okafor", "Thaddeus Lindqvist", "Ottilie Brambleby",
             "Casimir Vantongeren", "Philippa Marchetti")
NEW_PATHS = ("src/core/ledger_sync.py", "/etc/ctxproxy/override.yaml", "lib/parser/tokenize.ts",
             "tests/unit/test_quota_guard.py", "docs/runbooks/rollback.md")
NEW_URLS = ("https://status.example.org/incidents/4471", "https://git.example.com/acme/api/pull/982",
            "http://intranet.example.net/wiki/Release_Train")
_PATH = re.compile(r"(?<![\w/.-])(?:/?[\w.-]+/)+[\w-]+\.[A-Za-z]{1,5}(?![\w/])")
_ID = re.compile(r"(?<![\w./-])(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z][\w]*(?:-[\w]+)+(?![\w-]|[.:/]\w)")
_NUMBER = re.compile(r"(?<![\w.,-])\d{3,6}(?![\w.,]\d|\w)")
_SYMBOL = re.compile(r"`([a-z]+(?:_[a-z]+)+)`")


@dataclass(frozen=True)
class Window:
    """A summarized span: its name and its source text (as a summarizer would see it)."""

    name: str
    source: str


def load_session(path: Path) -> list[StoredMessage]:
    """A real session file (meta line, tools line, one OpenAI message a line) as stored messages."""
    lines = path.read_text(encoding="utf-8").splitlines()[2:]
    return [StoredMessage(id=i + 1, conversation_id=path.stem, seq=i, role=m["role"], message=m,
                          token_count=1, chain_hash="", content_hash="")
            for i, m in enumerate(json.loads(line) for line in lines)]


def real_windows(directory: Path = SESSIONS_DIR, size: int = WINDOW) -> list[Window]:
    """Consecutive windows of every real session (none when the directory is absent)."""
    windows: list[Window] = []
    for path in sorted(directory.glob("*.jsonl")) if directory.is_dir() else ():
        messages = [m for m in load_session(path) if m.role != "system"]
        for start in range(0, len(messages) - size // 2, size):
            chunk = messages[start:start + size]
            windows.append(Window(f"{path.stem}:{chunk[0].id}-{chunk[-1].id}", build_source_text(chunk)))
    return windows


def generator_windows(count: int = 6) -> list[tuple[Window, PlantedFacts]]:
    """Generated conversations (bench/generator.py), whole, with the facts they plant."""
    windows = []
    for seed in range(count):
        conv = generate_conversation(seed, n_turns=20, target_tokens=6_000)
        stored = [StoredMessage(id=i + 1, conversation_id="g", seq=i, role=m["role"], message=m,
                                token_count=1, chain_hash="", content_hash="")
                  for i, m in enumerate(conv.messages) if m["role"] != "system"]
        windows.append((Window(f"generator:{seed}", build_source_text(stored)),
                        draw_facts(random.Random(seed))))
    return windows


def _month_name(iso: str) -> str:
    year, month, day = iso.split("-")
    months = ("January", "February", "March", "April", "May", "June", "July", "August",
              "September", "October", "November", "December")
    return f"{months[int(month) - 1]} {int(day)}, {year}"


def generator_summary(f: PlantedFacts) -> str:
    """A faithful summary of a generated conversation: its facts reworded (name in lowercase, amount
    without thousands separator, deadline with a month name, order id in lowercase)."""
    refund = f.refund.replace(",", "")
    return "\n".join([
        "## Intent",
        f"- Customer {f.customer.lower()} was double charged on order {f.order.lower()} (ticket {f.ticket}).",
        "## Decisions",
        f"- Refund of {refund} requested; it must go out by {_month_name(f.deadline)}.",
        f"- Rounding switches to {f.decision}; the fix ships in release {f.release}.",
        "## Files and artifacts",
        f"- Change only {f.real_path}; the legacy copy stays untouched.",
        "## Errors and fixes",
        "- Stale exchange rates were ruled out; rounding is the cause.",
        "## Open operations and approvals",
        f"- Approval {f.approval_id} from {f.approver} is pending; goodwill budget now {f.budget_new}.",
        "## Next steps",
        f"- Wait for sign-off, then refund the {f.weight} parcel's duplicate charge.",
        "Expand for details about: #2, #3"])


# --------------------------------------------------------------------------- faithful summaries


def _facts_of(source: str) -> dict[str, list[str]]:
    """Facts of a source, found with the bench's own patterns (not the verifier's)."""
    def unique(values: list[str]) -> list[str]:
        return list(dict.fromkeys(values))[:6]
    refs = re.findall(r"\[(#\d+) \w+\]", source)
    return {"path": unique(_PATH.findall(source)), "id": unique(_ID.findall(source)),
            "number": unique(_NUMBER.findall(source)), "symbol": unique(_SYMBOL.findall(source)),
            "ref": unique(refs)}


def _reworded(value: str, kind: str, rng: random.Random) -> str:
    """A faithful rewording of one fact: case change, thousands separator, shortened path."""
    if kind == "id":
        return value.upper() if rng.random() < 0.5 else value.lower()
    if kind == "number" and len(value) >= 4 and rng.random() < 0.6:
        return f"{int(value):,}"
    if kind == "path" and "/" in value and rng.random() < 0.5:
        return value.rsplit("/", 1)[-1] if rng.random() < 0.5 else value.lstrip("/").split("/", 1)[-1]
    return f"`{value}`" if kind in ("path", "symbol") else value


def abstractive_summary(source: str, rng: random.Random) -> str | None:
    """A structured summary in other words that keeps (reworded) facts of `source`."""
    facts = _facts_of(source)
    picked = [(kind, v) for kind in ("path", "id", "number", "symbol") for v in facts[kind][:2]]
    if len(picked) < 2:
        return None
    lines = ["## Intent", f"- {rng.choice(OPENERS)} the work described by the user and keep it moving."]
    sections = ("## Decisions", "## Files and artifacts", "## Errors and fixes", "## Next steps")
    for index, (kind, value) in enumerate(picked):
        if index % 2 == 0:
            lines.append(sections[min(index // 2, len(sections) - 1)])
        opener = rng.choice(OPENERS)
        lines.append(f"- {opener} around {_reworded(value, kind, rng)}; {rng.choice(OPENERS).lower()} "
                     "it afterwards.")
    refs = ", ".join(facts["ref"][:3]) or "history"
    lines.append(f"Expand for details about: {refs}")
    return "\n".join(lines)


def faithful_cases(window: Window, rng: random.Random) -> list[CalibrationCase]:
    cases = [CalibrationCase("faithful/extractive", ExtractiveSummarizer().summarize(window.source, 300),
                             window.source)]
    summary = abstractive_summary(window.source, rng)
    if summary is not None:
        cases.append(CalibrationCase("faithful/abstractive", summary, window.source))
    return cases


def handwritten_cases(sessions: dict[str, list[StoredMessage]]) -> list[CalibrationCase]:
    """Hand-written summaries of real windows (bench/verifier_corpus.json), faithful by review."""
    if not HANDWRITTEN.exists():
        return []
    cases = []
    for entry in json.loads(HANDWRITTEN.read_text(encoding="utf-8")):
        messages = sessions.get(entry["session"])
        if messages is None:
            continue
        chunk = [m for m in messages if entry["first"] <= m.id <= entry["last"]]
        cases.append(CalibrationCase("faithful/handwritten", entry["summary"], build_source_text(chunk)))
    return cases


# ---------------------------------------------------------------------------- invented variants


def _absent(value: str, source: str) -> bool:
    return value.lower() not in source.lower()


def _changed_digit(summary: str, rng: random.Random) -> str | None:
    """A digit-bearing word of the summary with one digit changed."""
    words: list[str] = [w for w in re.findall(r"[\w./#-]*\d[\w./#-]*", summary) if not w.startswith("#")]
    if not words:
        return None
    word: str = rng.choice(words)
    index = rng.choice([i for i, c in enumerate(word) if c.isdigit()])
    return word[:index] + str((int(word[index]) + rng.randint(1, 8)) % 10) + word[index + 1:]


def invented_values(summary: str, source: str, rng: random.Random) -> dict[str, str]:
    """One invented value per mutation kind (only values the source does not hold)."""
    ids = _ID.findall(summary) or ["ORD-4471"]
    candidates = {
        "changed_digit": _changed_digit(summary, rng),
        "changed_id_suffix": f"{rng.choice(ids)}-{rng.choice('BCXZ')}",
        "new_path": rng.choice(NEW_PATHS),
        "new_name": rng.choice(NEW_NAMES),
        "new_url": rng.choice(NEW_URLS),
        "new_date": f"2027-{rng.randint(1, 12):02d}-{rng.randint(10, 28):02d}",
        "new_amount": f"${rng.randint(1_000, 9_999):,}.{rng.randint(10, 99)}",
    }
    return {k: v for k, v in candidates.items() if v and _absent(v, source)}


def invented_cases(base: CalibrationCase, rng: random.Random) -> list[CalibrationCase]:
    cases = []
    for kind, value in invented_values(base.summary, base.sources, rng).items():
        sentence = f"- {rng.choice(OPENERS)} {value} as agreed."
        if kind == "new_name":
            sentence = f"- {value} approved the change."
        cases.append(CalibrationCase(f"invented/{kind}", f"{base.summary}\n{sentence}", base.sources,
                                     invented=value))
    return cases


# --------------------------------------------------------------------------------------- running


def build_corpus(seed: int = 11, sessions_dir: Path = SESSIONS_DIR) -> list[CalibrationCase]:
    """The whole labelled corpus, deterministic for `seed`."""
    rng = random.Random(seed)
    generated = generator_windows()
    cases: list[CalibrationCase] = []
    for window in real_windows(sessions_dir) + [w for w, _ in generated]:
        cases += faithful_cases(window, rng)
    cases += [CalibrationCase("faithful/generator", generator_summary(f), w.source) for w, f in generated]
    sessions = {p.stem: load_session(p) for p in sorted(sessions_dir.glob("*.jsonl"))} \
        if sessions_dir.is_dir() else {}
    cases += handwritten_cases(sessions)
    for base in [c for c in cases if c.category in ("faithful/abstractive", "faithful/handwritten",
                                                     "faithful/generator")]:
        cases += invented_cases(base, rng)
    return cases


def run(seed: int = 11, sessions_dir: Path = SESSIONS_DIR) -> CalibrationReport:
    """Build the corpus and measure the verifier on it."""
    return calibration_rates(build_corpus(seed, sessions_dir))


def report_dict(report: CalibrationReport) -> dict[str, object]:
    return {"faithful": report.faithful, "false_rejections": report.false_rejections,
            "false_rejection_rate": round(report.false_rejection_rate, 4),
            "invented": report.invented, "caught": report.caught,
            "catch_rate": round(report.catch_rate, 4),
            "by_category": {k: {"cases": n, "rejected": r} for k, (n, r) in report.by_category.items()},
            "misjudged": [list(m) for m in report.misjudged]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Measure the summary verifier on a labelled corpus.")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--json", type=Path, help="write the report as JSON here")
    parser.add_argument("--show", type=int, default=10, help="misjudged cases to print")
    args = parser.parse_args(argv)
    report = run(args.seed)
    print(f"faithful: {report.faithful}, falsely rejected {report.false_rejections} "
          f"({report.false_rejection_rate:.1%})")
    print(f"invented: {report.invented}, caught {report.caught} ({report.catch_rate:.1%})")
    for category, (cases, rejected) in report.by_category.items():
        print(f"  {category:32} {rejected:4}/{cases:<4} rejected")
    for category, reason in report.misjudged[:args.show]:
        print(f"  misjudged {category}: {reason}", file=sys.stderr)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report_dict(report), indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
