"""Deterministic generator of long agentic conversations with planted facts and their checks.

`python -m bench.generator --count 6 --turns 150 --seed 7 -o out.jsonl` writes one conversation per
line: `{"id", "messages", "tools", "checks": [{"kind", "fact", "must_be_current", "stale_values",
"distractors"}]}`. Facts are planted early and never repeated late, so only a strategy that
really retains them passes; corrections, a near-identical file name, a pending approval and a
discarded hypothesis test what a careless summary gets wrong.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import filler
from bench.facts import PlantedFacts, draw_facts
from compaction import Message
from replay.records import Check, RecordedConversation, write_jsonl

DEFAULT_TURNS = 150
DEFAULT_TOKENS = 40_000
SYSTEM_PROMPT = ("You are Atlas, the support engineer assistant of Northwind Commerce. Be precise "
                 "with order numbers, amounts and dates; never guess a value; ask before any refund.")
TOOLS: tuple[dict[str, Any], ...] = tuple(
    {"type": "function", "function": {"name": name, "description": desc, "parameters": {
        "type": "object", "properties": {arg: {"type": "string"}}, "required": [arg]}}}
    for name, desc, arg in (("lookup_order", "Look up an order by number", "order"),
                            ("read_file", "Read a repository file", "path"),
                            ("grep_logs", "Search service logs", "query"),
                            ("run_tests", "Run the test suite of a path", "path")))


def checks_for(f: PlantedFacts) -> tuple[Check, ...]:
    """The checks a conversation with facts `f` must pass."""
    return (
        Check("name", f.customer), Check("order", f.order), Check("amount_currency", f.refund),
        Check("amount_unit", f.weight), Check("deadline", f.deadline),
        Check("path", f.real_path, distractors=(f.decoy_path,)), Check("ticket", f.ticket),
        Check("correction", f.budget_new, True, (f.budget_old,)),
        Check("approval", f.approval_id, True),
        Check("discarded_hypothesis", f.decision, True, (f.hypothesis_value,)),
        Check("decision", f.release),
    )


@dataclass
class _Builder:
    """Accumulates messages; every helper appends one exchange."""

    rng: random.Random
    filler_tokens: int
    messages: list[Message] = field(default_factory=list)
    calls: int = 0

    def user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def assistant(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})

    def tool_round(self, calls: Sequence[tuple[str, dict[str, str], str]]) -> None:
        """One assistant message with (possibly parallel) tool calls, then one result per call."""
        ids = [f"call_{self.rng.getrandbits(48):012x}" for _ in calls]
        self.messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for cid, (name, args, _) in zip(ids, calls, strict=True)]})
        for cid, (_, _, result) in zip(ids, calls, strict=True):
            self.messages.append({"role": "tool", "tool_call_id": cid, "content": result})

    def filler_turn(self) -> None:
        jitter = self.rng.uniform(0.5, 1.5)
        self.user(filler.user_filler(self.rng, int(self.filler_tokens * 0.35 * jitter)))
        self.assistant(filler.paragraph(self.rng, int(self.filler_tokens * 0.65 * jitter)))


def _opening(b: _Builder, f: PlantedFacts) -> None:
    b.user(f"Hi, I'm handling a complaint from our customer {f.customer}. Their order number is "
           f"{f.order} and the support ticket is {f.ticket}. They were double charged.")
    b.assistant(f"Thanks. I noted customer {f.customer}, order {f.order} and ticket {f.ticket}. "
                "Let me look at the order.")


def _refund(b: _Builder, f: PlantedFacts) -> None:
    b.user(f"The customer asks for a refund of {f.refund}. Can you check the order details?")
    b.tool_round([("lookup_order", {"order": f.order}, json.dumps(
        {"order": f.order, "status": "delivered", "weight": f.weight, "carrier": "DHL",
         "charged_twice": True, "refund_requested": f.refund}, ensure_ascii=False))])
    b.assistant(f"Order {f.order} was delivered; the parcel weighs {f.weight}. The duplicate charge "
                f"matches the requested refund of {f.refund}.")


def _deadline(b: _Builder, f: PlantedFacts) -> None:
    b.user(f"Legal says the refund must be issued by {f.deadline} at the latest, keep that deadline.")
    b.assistant(f"Understood: the refund deadline is {f.deadline}.")


def _files(b: _Builder, f: PlantedFacts, size: int) -> None:
    b.user(f"The double charge comes from the invoice code. The file to fix is {f.real_path}; "
           f"{f.decoy_path} is the legacy copy and must not be touched. Read both to compare.")
    b.tool_round([("read_file", {"path": f.real_path},
                   filler.source_file(b.rng, size, f.real_path, "ROUND_HALF_UP")),
                  ("read_file", {"path": f.decoy_path},
                   filler.source_file(b.rng, size, f.decoy_path, "ROUND_HALF_UP"))])
    b.assistant(f"Both files read. The change goes into {f.real_path} only; {f.decoy_path} stays as "
                "it is.")


def _budget(b: _Builder, f: PlantedFacts) -> None:
    b.user(f"The budget approved for goodwill credits on this account is {f.budget_old}.")
    b.assistant(f"Noted, goodwill budget {f.budget_old}.")


def _approval(b: _Builder, f: PlantedFacts) -> None:
    b.user(f"Before the refund goes out we need sign-off. I opened approval request {f.approval_id} "
           f"with {f.approver}; it is still pending.")
    b.assistant(f"Understood: approval {f.approval_id} from {f.approver} is pending, so no refund "
                "until it is granted.")


def _hypothesis(b: _Builder, f: PlantedFacts, size: int) -> None:
    b.user("Why would the charge be doubled? Any idea?")
    b.tool_round([("grep_logs", {"query": "charge retry"}, filler.log_output(b.rng, size, "billing"))])
    b.assistant("Hypothesis: the exchange-rate cache serves a stale rate and the retry charges again; "
                f"if so, the fix would be to lower RATE_CACHE_TTL to {f.hypothesis_value}. I will verify "
                "this before deciding.")


def _discard(b: _Builder, f: PlantedFacts, size: int) -> None:
    b.user("Please run the billing tests to confirm.")
    b.tool_round([("run_tests", {"path": "tests/billing"}, filler.test_report(b.rng, size)),
                  ("grep_logs", {"query": "rate cache"}, filler.log_output(b.rng, size // 2, "rates"))])
    b.assistant(f"The cache hypothesis is ruled out: rates were fresh, so RATE_CACHE_TTL stays as it "
                f"is. The real cause is rounding. "
                f"Decision: switch the rounding mode to {f.decision} in {f.real_path}.")
    b.user(f"Agreed. Ship it in release {f.release}.")
    b.assistant(f"Decision recorded: the fix ships in release {f.release}.")


def _correction(b: _Builder, f: PlantedFacts) -> None:
    b.user(f"Correction on the goodwill budget: finance raised it to {f.budget_new}. "
           f"The earlier figure is superseded.")
    b.assistant(f"Corrected: the goodwill budget is now {f.budget_new}.")


def _big_tool_turn(b: _Builder, size: int) -> None:
    b.user("Can you check the worker logs for anything odd today?")
    b.tool_round([("grep_logs", {"query": "worker"}, filler.log_output(b.rng, size, "worker"))])
    b.assistant(filler.paragraph(b.rng, b.filler_tokens // 2))


def _schedule(n_turns: int) -> dict[int, str]:
    """Which scripted exchange starts at which user-turn index (the rest is filler)."""
    if n_turns < 16:
        raise ValueError(f"n_turns must be at least 16 to plant every fact, got {n_turns}")
    plan = {0: "opening", 1: "refund", 2: "deadline", 3: "files", 4: "budget",
            int(n_turns * 0.2): "approval", int(n_turns * 0.3): "hypothesis",
            int(n_turns * 0.45): "discard", int(n_turns * 0.55): "correction"}
    for k in range(1, 8):
        at = int(n_turns * k / 8) + 2
        if at < n_turns - 1 and all(abs(at - p) > 2 for p in plan):
            plan[at] = "big_tool"
    return plan


_USER_TURNS = {"discard": 2}


def _play(b: _Builder, f: PlantedFacts, step: str, big: int) -> None:
    simple = {"opening": _opening, "refund": _refund, "deadline": _deadline, "budget": _budget,
              "approval": _approval, "correction": _correction}
    if step in simple:
        simple[step](b, f)
    elif step == "files":
        _files(b, f, int(big * 0.7))
    elif step == "hypothesis":
        _hypothesis(b, f, big // 2)
    elif step == "discard":
        _discard(b, f, big // 2)
    elif step == "big_tool":
        _big_tool_turn(b, big)


def generate_conversation(seed: int, n_turns: int = DEFAULT_TURNS, target_tokens: int = DEFAULT_TOKENS,
                          conv_id: str | None = None) -> RecordedConversation:
    """One conversation of `n_turns` user turns and about `target_tokens` tokens, fully seeded."""
    rng = random.Random(seed)
    facts = draw_facts(rng)
    plan = _schedule(n_turns)
    big = max(200, int(target_tokens * 0.05))
    scripted = sum(_USER_TURNS.get(s, 1) for s in plan.values())
    n_big = sum(1 for s in plan.values() if s == "big_tool")
    fixed = 2.65 * big + 1.1 * big * n_big + 60 * scripted
    filler_tokens = max(20, int(0.9 * (target_tokens - fixed) / max(1, n_turns - scripted)))
    b = _Builder(rng, filler_tokens)
    b.messages.append({"role": "system", "content": SYSTEM_PROMPT})
    turn = 0
    while turn < n_turns - 1:
        step = plan.get(turn)
        if step is None:
            b.filler_turn()
        else:
            _play(b, facts, step, big)
        turn += _USER_TURNS.get(step or "", 1)
    b.user("Give me a short status update on this case: what is done and what is still open?")
    b.assistant("Status: the root cause is understood, the fix is planned and the refund waits for "
                "the pending sign-off.")
    return RecordedConversation(conv_id or f"conv-{seed}", tuple(b.messages), checks_for(facts), TOOLS)


def generate_suite(count: int, seed: int = 7, n_turns: int = DEFAULT_TURNS,
                   target_tokens: int = DEFAULT_TOKENS) -> list[RecordedConversation]:
    """`count` conversations with seeds derived from `seed` (same arguments, same suite)."""
    return [generate_conversation(seed * 1_000 + i, n_turns, target_tokens, f"conv-{seed}-{i}")
            for i in range(count)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate long conversations with planted facts.")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--turns", type=int, default=DEFAULT_TURNS)
    parser.add_argument("--tokens", type=int, default=DEFAULT_TOKENS)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)
    write_jsonl(args.output, generate_suite(args.count, args.seed, args.turns, args.tokens))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
