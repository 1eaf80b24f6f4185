"""Long tool outputs of an agent loop: file reads, grep results, test logs, stack traces, git logs.

Every output is built from a seeded RNG and its own vocabulary (no planted value can appear by
chance); `extra` lines (facts and their decoys) are spliced in at a random place, so the facts
sit inside ordinary-looking output as they do in real sessions.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

WORDS = ("amortize", "bucket", "carry", "drift", "escrow", "float", "gross", "holdback", "invoice",
         "journal", "kiting", "lien", "margin", "netting", "offset", "posting", "quota", "reserve",
         "spread", "tranche", "unwind", "vault", "wire", "accrual", "chargeback", "dunning", "sweep")
PACKAGES = ("core", "jobs", "adapters", "domain", "api", "workers")


@dataclass(frozen=True)
class Output:
    """One tool result's text and the symbols and files it shows (for the agent's next notes)."""

    text: str
    symbols: tuple[str, ...]
    files: tuple[str, ...]


def symbol(rng: random.Random) -> str:
    """A snake_case function name from the filler vocabulary."""
    return f"{rng.choice(('compute', 'apply', 'load', 'close', 'split', 'post'))}_{rng.choice(WORDS)}"


def filler_path(rng: random.Random) -> str:
    """A source file of the filler vocabulary (`src/jobs/netting_sweep.py`)."""
    return f"src/{rng.choice(PACKAGES)}/{rng.choice(WORDS)}_{rng.choice(WORDS)}.py"


def _splice(rng: random.Random, lines: list[str], extra: Sequence[str]) -> str:
    for line in extra:
        lines.insert(rng.randint(0, len(lines)), line)
    return "\n".join(lines)


def _function(rng: random.Random, name: str, comment: str) -> list[str]:
    args = ", ".join(rng.sample(("batch", "ledger", "amount", "currency", "cutoff", "rail"), 2))
    body = [f"    {rng.choice(WORDS)} = {rng.choice(WORDS)}.{symbol(rng)}({args.split(', ')[0]})"
            for _ in range(rng.randint(3, 9))]
    return [f"def {name}({args}):", f'    """{comment}"""', *body,
            f"    return {rng.choice(WORDS)}", ""]


def file_read(rng: random.Random, path: str, extra: Sequence[str], comment: str) -> Output:
    """A numbered source listing of `path` (several functions)."""
    names = [symbol(rng) for _ in range(rng.randint(4, 12))]
    lines = [f"from {rng.choice(PACKAGES)}.{rng.choice(WORDS)} import {rng.choice(WORDS)}", ""]
    for name in names:
        lines += _function(rng, name, comment.format(x=name))
    text = _splice(rng, lines, extra)
    numbered = "\n".join(f"{n:>5}\t{line}" for n, line in enumerate(text.split("\n"), 1))
    return Output(numbered, tuple(names), (path,))


def grep(rng: random.Random, pattern: str, extra: Sequence[str], comment: str) -> Output:
    """`path:line:match` lines for `pattern` across filler files."""
    files = [filler_path(rng) for _ in range(rng.randint(3, 8))]
    lines = [f"{rng.choice(files)}:{rng.randint(3, 480)}:    {pattern}({rng.choice(WORDS)}, "
             f"{rng.choice(WORDS)})" for _ in range(rng.randint(10, 40))]
    return Output(_splice(rng, lines, extra), (pattern,), tuple(dict.fromkeys(files)))


def _test_line(rng: random.Random, path: str, percent: int) -> str:
    outcome = "FAILED" if rng.random() < 0.08 else "PASSED"
    return f"{path}::test_{rng.choice(WORDS)}_{rng.choice(WORDS)} {outcome} [{percent:>3}%]"


def test_log(rng: random.Random, command: str, extra: Sequence[str], comment: str) -> Output:
    """A pytest session: header, one line per test, a failure section, the summary line."""
    files = [f"tests/{rng.choice(PACKAGES)}/test_{rng.choice(WORDS)}.py" for _ in range(4)]
    count = rng.randint(20, 70)
    lines = [f"$ {command}", "============ test session starts ============",
             f"platform linux -- Python 3.12.{rng.randint(1, 8)}, pytest-8.{rng.randint(0, 3)}.0",
             *(_test_line(rng, rng.choice(files), 100 * (i + 1) // count) for i in range(count))]
    failed = sum("FAILED" in line for line in lines)
    lines += [comment.format(x=symbol(rng)),
              f"====== {failed} failed, {count - failed} passed in {rng.uniform(2, 40):.2f}s ======"]
    return Output(_splice(rng, lines, extra), (), tuple(files))


def stack_trace(rng: random.Random, command: str, extra: Sequence[str], comment: str) -> Output:
    """A Python traceback through filler frames (the facts' exception lines come as `extra`)."""
    frames = [(filler_path(rng), rng.randint(10, 400), symbol(rng)) for _ in range(rng.randint(4, 10))]
    lines = [f"$ {command}", "Traceback (most recent call last):"]
    for file, line, name in frames:
        lines += [f'  File "/srv/app/{file}", line {line}, in {name}', f"    {rng.choice(WORDS)}.{name}()"]
    lines += [comment.format(x=frames[-1][2]), f"RuntimeError: {rng.choice(WORDS)} {rng.choice(WORDS)}"]
    return Output(_splice(rng, lines, extra), tuple(n for _, _, n in frames), tuple(f for f, _, _ in frames))


def git_log(rng: random.Random, command: str, extra: Sequence[str], comment: str) -> Output:
    """`git log --oneline` style output with hashes and messages."""
    lines = [f"$ {command}"] + [
        f"{rng.getrandbits(28):07x} {rng.choice(('fix', 'feat', 'chore'))}({rng.choice(PACKAGES)}): "
        f"{rng.choice(WORDS)} {rng.choice(WORDS)}" for _ in range(rng.randint(12, 30))]
    return Output(_splice(rng, lines, extra), (), ())


Renderer = Callable[[random.Random, str, Sequence[str], str], Output]
RUNNERS: tuple[Renderer, ...] = (test_log, stack_trace, git_log)
