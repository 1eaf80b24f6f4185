"""Low-signal text for generated conversations: chit-chat turns and large tool outputs.

Filler deliberately carries no planted fact, so that a strategy keeping only recent turns keeps
filler and loses the facts (an old fact is not a less useful one).
"""

from __future__ import annotations

import random

_SUBJECTS = ("the staging deploy", "the CI pipeline", "the flaky integration suite", "the lint job",
             "the dashboard widget", "the onboarding doc", "the release notes draft",
             "the retry helper", "the metrics exporter", "the queue consumer", "the style guide")
_VERBS = ("looks stable again", "needs another look", "was rerun without changes",
          "is waiting for review", "got a small cleanup", "still prints noisy warnings",
          "behaves as expected locally", "could use clearer naming", "was discussed at standup")
_TAILS = ("nothing urgent there.", "we can revisit it later.", "no action needed from the customer.",
          "it does not affect the refund.", "I will keep an eye on it.", "that is mostly cosmetic.",
          "the team agreed to leave it for now.", "it is unrelated to the billing issue.")
_ACKS = ("Thanks, that helps.", "Ok, noted.", "Sounds good.", "Got it, thanks.", "Makes sense.",
         "Alright.", "Perfect, thank you.", "Understood.")
_LOG_LEVELS = ("INFO", "INFO", "INFO", "DEBUG", "WARN")
_LOG_EVENTS = ("processed batch", "flushed cache segment", "renewed lease", "acked message",
               "reconciled ledger row", "retried webhook", "rotated log file", "synced rate table")


def sentence(rng: random.Random) -> str:
    """One low-signal sentence."""
    return f"{rng.choice(_SUBJECTS).capitalize()} {rng.choice(_VERBS)}; {rng.choice(_TAILS)}"


def paragraph(rng: random.Random, approx_tokens: int) -> str:
    """Filler of roughly `approx_tokens` tokens (a sentence is ~14 tokens)."""
    count = max(1, round(approx_tokens / 14))
    return " ".join(sentence(rng) for _ in range(count))


def user_filler(rng: random.Random, approx_tokens: int) -> str:
    return f"{rng.choice(_ACKS)} Side note: {paragraph(rng, approx_tokens)}"


def log_output(rng: random.Random, approx_tokens: int, service: str) -> str:
    """A tool result shaped like a service log (~28 tokens a line)."""
    lines = []
    for i in range(max(1, approx_tokens // 28)):
        minute, second = divmod(i * 7 + rng.randint(0, 6), 60)
        lines.append(f"2026-11-02T09:{minute % 60:02d}:{second:02d}Z {rng.choice(_LOG_LEVELS)} "
                     f"{service} worker-{rng.randint(1, 8)} {rng.choice(_LOG_EVENTS)} "
                     f"n={rng.randint(10, 999)} took={rng.randint(2, 400)}ms")
    return "\n".join(lines)


def source_file(rng: random.Random, approx_tokens: int, path: str, rounding: str) -> str:
    """A tool result shaped like a Python source file (~20 tokens a function line)."""
    lines = [f"# {path}", "from decimal import Decimal, " + rounding, ""]
    for i in range(max(1, approx_tokens // 37)):
        lines += [f"def step_{i}(amount: Decimal, rate: Decimal) -> Decimal:",
                  f"    return (amount * rate).quantize(Decimal('0.01'), rounding={rounding})", ""]
    return "\n".join(lines)


def test_report(rng: random.Random, approx_tokens: int) -> str:
    """A tool result shaped like a pytest run."""
    lines = ["============================= test session starts =============================="]
    for i in range(max(1, approx_tokens // 14)):
        status = "PASSED" if rng.random() > 0.05 else "FAILED"
        lines.append(f"tests/test_module_{i % 23}.py::test_case_{i} {status}")
    lines.append("======================== run finished, see failures above ========================")
    return "\n".join(lines)
