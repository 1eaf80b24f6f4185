"""A small deterministic generator of a long agentic support conversation with planted facts.

`generate(turns=150, seed=7)` returns a `Conversation`: one `Step` per client request. A step is
what the client appends before sending (a user message, or the results of the previous reply's
tool calls) and what the fake model answers (text, or one/two parallel tool calls). Facts are
planted in the first steps and never repeated later; the budget is corrected around step 70.
Tool outputs (logs, code, test runs) are 1-3k tokens each.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]

SYSTEM_PROMPT = ("You are Atlas, the billing support engineer assistant of Northwind Commerce. Be "
                 "precise with order numbers, amounts and dates; never guess a value.")
TOOLS: tuple[JSON, ...] = tuple(
    {"type": "function", "function": {"name": name, "description": desc, "parameters": {
        "type": "object", "properties": {arg: {"type": "string"}}, "required": [arg]}}}
    for name, desc, arg in (("read_file", "Read a repository file", "path"),
                            ("grep_logs", "Search the service logs", "query"),
                            ("run_tests", "Run the tests under a path", "path")))

# Planted facts: name -> the verbatim value that must survive.
FACTS: dict[str, str] = {
    "customer": "Helena Marchetti",
    "order": "ORD-48213",
    "amount": "$1,249.50",
    "deadline": "2025-03-14",
    "path": "src/billing/invoice_v2.py",
    "ticket": "BILL-2291",
    "budget": "$5,200",
}
SIMILAR_PATH = "src/billing/invoice_v3.py"
STALE_BUDGET = "$4,500"
CORRECTION_STEP = 70

_PLANTED_USER = (
    "Hi Atlas. I'm working on the account of customer Helena Marchetti today; her order number is "
    "ORD-48213 and she was charged twice for it.",
    "The duplicate charge has to be refunded: the refund amount is $1,249.50, nothing more.",
    "Finance wants the billing fix shipped before the deadline. The deadline is 2025-03-14.",
    "Internal tracking for all of this: ticket BILL-2291. The budget is $4,500 for the billing work.",
)
_USER_LINES = (
    "Can you check whether the retry worker still double-posts charges after a timeout?",
    "Let's also look at how the ledger reconciles partial captures at the end of the day.",
    "I wonder if the webhook handler swallows the idempotency header when the payload is large.",
    "Please keep a note of anything that looks like a race between capture and refund.",
    "What would a minimal patch look like, without touching the public API?",
    "The product team asked whether this could affect subscription renewals too.",
    "Could the currency rounding explain the off-by-a-cent totals we saw last week?",
    "Let's make sure the fix has a regression test before we hand it over to review.",
    "Is there anything in the logs about the scheduler skipping the nightly settlement run?",
    "OK, keep going with the investigation, I'll review the summary afterwards.",
)
_ASSISTANT_LINES = (
    "I looked at the retry path: the worker re-enqueues the capture without checking the ledger "
    "entry first, which would explain a second posting after a gateway timeout.",
    "The reconciliation job groups captures per merchant and day; partial captures are summed "
    "before the refund table is consulted, so a late refund can be counted twice.",
    "The webhook handler copies headers into a plain dict; the idempotency header survives unless "
    "the body exceeds the buffer, in which case the streaming branch drops it.",
    "Noted. I will flag every place where capture and refund can interleave without a lock.",
    "A minimal patch would guard the retry with a ledger lookup keyed by the idempotency token "
    "and leave the public API unchanged.",
    "Renewals use the same capture path, so they could be affected if a renewal times out.",
    "Rounding happens per line item and again on the total; that can drift by one cent.",
    "Agreed, a regression test should simulate a gateway timeout followed by a retry.",
    "The scheduler logs show the nightly run starting on time; nothing indicates a skipped run.",
    "Understood, continuing; I will keep the findings organised for the review.",
)
_CODE_NAMES = ("capture", "refund", "ledger", "retry", "settle", "invoice", "webhook", "rounding")
_LOG_SERVICES = ("billing.worker", "billing.api", "ledger.sync", "gateway.client", "scheduler")


@dataclass(frozen=True)
class Step:
    """One client request: messages appended by the client, then the model's scripted answer."""

    client: tuple[JSON, ...]
    reply_text: str | None = None
    reply_calls: tuple[JSON, ...] = ()  # {"id", "name", "arguments"} (tests.fakes.upstream shape)


@dataclass(frozen=True)
class Conversation:
    system: JSON
    tools: tuple[JSON, ...]
    steps: tuple[Step, ...]
    facts: dict[str, str] = field(default_factory=lambda: dict(FACTS))
    stale: dict[str, str] = field(default_factory=lambda: {"budget": STALE_BUDGET})

    def full_history(self) -> list[JSON]:
        """The client's final history (with the scripted replies as the proxy would return them)."""
        out: list[JSON] = [self.system]
        for step in self.steps:
            out += [*step.client, reply_message(step)]
        return out


def reply_message(step: Step) -> JSON:
    """The assistant message a client stores for a step's scripted reply."""
    message: JSON = {"role": "assistant", "content": step.reply_text}
    if step.reply_calls:
        message["tool_calls"] = [{"id": c["id"], "type": "function",
                                  "function": {"name": c["name"], "arguments": c["arguments"]}}
                                 for c in step.reply_calls]
    return message


class _Writer:
    """Deterministic filler text: log excerpts, code files and test runs of a given size."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def log_lines(self, count: int) -> str:
        r = self.rng
        lines = []
        for i in range(count):
            level = r.choice(("INFO", "INFO", "INFO", "WARN", "ERROR"))
            lines.append(f"2025-02-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}"
                         f":{r.randint(0, 59):02d}Z {level} {r.choice(_LOG_SERVICES)} "
                         f"req={r.getrandbits(32):08x} op={r.choice(_CODE_NAMES)} "
                         f"latency={r.randint(5, 900)}ms attempt={r.randint(1, 3)} line={i}")
        return "\n".join(lines)

    def code(self, module: str, functions: int) -> str:
        r = self.rng
        parts = [f'"""{module}: billing helpers."""', "from decimal import Decimal", ""]
        for i in range(functions):
            name = f"{r.choice(_CODE_NAMES)}_{r.choice(_CODE_NAMES)}_{i}"
            parts += [f"def {name}(amount: Decimal, attempt: int = {r.randint(1, 5)}) -> Decimal:",
                      f'    """Apply the {r.choice(_CODE_NAMES)} rule to one line item."""',
                      f"    factor = Decimal('{r.randint(1, 99)}') / Decimal('100')",
                      "    if attempt > 1:",
                      "        amount = amount - amount * factor",
                      "    return amount.quantize(Decimal('0.01'))", ""]
        return "\n".join(parts)

    def test_run(self, cases: int) -> str:
        r = self.rng
        lines = [f"tests/billing/test_{r.choice(_CODE_NAMES)}.py::test_{r.choice(_CODE_NAMES)}_{i} "
                 f"{r.choice(('PASSED', 'PASSED', 'PASSED', 'FAILED'))} [{r.randint(1, 99)}%]"
                 for i in range(cases)]
        return "\n".join(lines) + f"\n{cases} tests collected"


def _tool_output(w: _Writer, name: str, tokens: int) -> str:
    # ~27 tokens per log line, ~70 per function, ~17 per test line (o200k)
    if name == "grep_logs":
        return w.log_lines(max(1, tokens // 27))
    if name == "read_file":
        return w.code("module", max(1, tokens // 70))
    return w.test_run(max(1, tokens // 17))


def _call(index: int, name: str, arg: str) -> JSON:
    key = {"read_file": "path", "grep_logs": "query", "run_tests": "path"}[name]
    return {"id": f"call_{index:03d}", "name": name, "arguments": json.dumps({key: arg})}


def generate(turns: int = 150, seed: int = 7) -> Conversation:
    """The conversation: `turns` client requests (planted facts first, a correction mid-way)."""
    rng = random.Random(seed)
    w = _Writer(rng)
    steps: list[Step] = [Step(({"role": "user", "content": text},), "Noted, thank you.")
                         for text in _PLANTED_USER]
    # Parallel read of the two near-identical files, then the user names the right one.
    steps.append(Step(({"role": "user", "content": "Please open both invoice modules."},), None,
                      (_call(0, "read_file", FACTS["path"]), _call(1, "read_file", SIMILAR_PATH))))
    steps.append(Step(tuple({"role": "tool", "tool_call_id": c, "content": w.code(p, 18)}
                            for c, p in (("call_000", FACTS["path"]), ("call_001", SIMILAR_PATH))),
                      "Both modules are open; they share most helpers."))
    steps.append(Step(({"role": "user", "content": f"The bug is in {FACTS['path']}, not in "
                        f"{SIMILAR_PATH}; v3 is not deployed yet."},), "Understood, I will focus there."))
    calls = 2
    while len(steps) < turns:
        i = len(steps)
        if i == CORRECTION_STEP:
            steps.append(Step(({"role": "user", "content": "Correction: the budget is $5,200, finance "
                                "raised it this morning."},), "Thanks, I have the corrected figure."))
        elif i % 10 == 0 and len(steps) + 2 <= turns:
            steps += _tool_round(rng, w, calls, parallel=(i // 10) % 3 == 0)
            calls += 2
        else:
            steps.append(Step(({"role": "user", "content": rng.choice(_USER_LINES)},),
                              rng.choice(_ASSISTANT_LINES)))
    return Conversation({"role": "system", "content": SYSTEM_PROMPT}, TOOLS, tuple(steps[:turns]))


def _tool_round(rng: random.Random, w: _Writer, first_call: int, *, parallel: bool) -> list[Step]:
    """Two steps: the model calls one or two tools; the client returns their (large) results."""
    names = ["grep_logs", "read_file", "run_tests"]
    picked = rng.sample(names, 2) if parallel else [rng.choice(names)]
    args = {"grep_logs": rng.choice(("double capture", "timeout retry", "settlement")),
            "read_file": f"src/billing/{rng.choice(_CODE_NAMES)}.py", "run_tests": "tests/billing"}
    calls = tuple(_call(first_call + k, name, args[name]) for k, name in enumerate(picked))
    sizes = [rng.randint(1_000, 1_600) for _ in picked] if parallel else [rng.randint(1_000, 2_500)]
    results = tuple({"role": "tool", "tool_call_id": c["id"], "content": _tool_output(w, c["name"], n)}
                    for c, n in zip(calls, sizes, strict=True))
    return [Step(({"role": "user", "content": rng.choice(_USER_LINES)},), None, calls),
            Step(results, rng.choice(_ASSISTANT_LINES))]


def request_history(conv: Conversation, turn: int) -> list[JSON]:
    """What the client sends at `turn` (0-based): everything before it plus the turn's own messages."""
    out: list[JSON] = [conv.system]
    for step in conv.steps[:turn]:
        out += [*step.client, reply_message(step)]
    return out + list(conv.steps[turn].client)
