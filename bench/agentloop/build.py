"""Assemble one agent-loop conversation: one to three user messages, tool rounds, planted facts.

Facts are introduced early (in the task or inside tool output, next to their decoys), never repeated,
and used again late by the agent (in a tool-call argument or its note): the request whose reply uses
a fact is where the check `used_at` points. Everything is drawn from `random.Random(seed)`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.agentloop.facts import Fact, draw_facts
from bench.agentloop.outputs import RUNNERS, Output, file_read, filler_path, grep, symbol
from bench.agentloop.prose import PROSE, Language, Prose
from compaction import Message
from replay.records import Check, RecordedConversation

TOKENS_PER_ROUND = 620  # measured mean of a round (note, call, output) across languages
MIN_ROUNDS = 30  # room for every fact's late use (the last 35 % of the rounds)
TOOLS: tuple[dict[str, Any], ...] = tuple(
    {"type": "function", "function": {"name": name, "description": about, "parameters": {
        "type": "object", "properties": {k: {"type": "string"} for k in args}, "required": list(args)}}}
    for name, about, args in (("read_file", "Read a file of the repository.", ("path",)),
                              ("grep", "Search the repository for a pattern.", ("pattern",)),
                              ("run", "Run a shell command in the repository.", ("command",))))


@dataclass
class Plan:
    """Where each fact is introduced and used, and when follow-up user messages arrive."""

    rounds: int
    task: list[Fact]  # stated in the first user message
    in_output: dict[int, list[Fact]]  # round -> facts shown in that round's tool output
    in_follow_up: dict[int, Fact]  # round -> fact stated by the follow-up user message before it
    uses: dict[int, Fact]  # round -> fact the agent uses in that round's message
    decoys: dict[int, list[str]]  # round -> decoys of facts the user stated, shown in its output


def plan(rng: random.Random, rounds: int) -> Plan:
    """Spread the facts: two in the task, up to two in follow-ups, the rest in early output."""
    facts = draw_facts(rng)
    task, rest = facts[:2], facts[2:]
    follow = rng.randint(0, 2)
    early = max(2, rounds * 2 // 5)
    follow_rounds = sorted(rng.sample(range(early // 2, early), follow)) if follow else []
    in_follow_up = dict(zip(follow_rounds, rest[:follow], strict=True))
    in_output: dict[int, list[Fact]] = {}
    for fact in rest[follow:]:
        in_output.setdefault(rng.randrange(1, early), []).append(fact)
    decoys: dict[int, list[str]] = {}
    for fact in (*task, *in_follow_up.values()):
        if fact.decoy is not None:
            decoys.setdefault(rng.randrange(1, early), []).append(f"{fact.kind}: {fact.decoy}")
    late = list(range(rounds * 13 // 20, rounds))
    uses = dict(zip(rng.sample(late, len(facts)), facts, strict=True))
    return Plan(rounds, task, in_output, in_follow_up, uses, decoys)


@dataclass
class Builder:
    """Appends messages round by round, remembering what the agent has seen recently."""

    rng: random.Random
    prose: Prose
    seed: int
    messages: list[Message] = field(default_factory=list)
    recent: list[str] = field(default_factory=list)  # symbols and files of the last outputs
    checks: list[Check] = field(default_factory=list)

    def call_id(self) -> str:
        """A tool-call id, unique in the conversation and drawn from the seeded stream."""
        return f"call_{self.seed}_{len(self.messages)}_{self.rng.getrandbits(32):08x}"

    def note(self, tool: str, target: str) -> str:
        """The agent's short note before a call (sometimes none, as agents often call silently)."""
        return self.rng.choice(self.prose.notes[tool]).format(x=target) if self.rng.random() < 0.7 else ""

    def round(self, shown: Sequence[str], use: Fact | None) -> None:
        """One assistant message with one tool call, and its result (`shown`: lines for its output)."""
        name, args, note = self._call(use)
        call = {"id": self.call_id(), "type": "function",
                "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}
        if use is not None:
            self.checks.append(Check(use.kind, use.value, distractors=tuple(filter(None, [use.decoy])),
                                     used_at=len(self.messages)))
        self.messages.append({"role": "assistant", "content": note, "tool_calls": [call]})
        output = self._output(name, next(iter(args.values())), shown)
        self.recent = [*output.symbols[:3], *output.files[:3]] or self.recent
        self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": output.text})

    def _call(self, use: Fact | None) -> tuple[str, dict[str, str], str]:
        """The tool call of a round: a use of `use` when given, else the next exploration step."""
        if use is not None:
            return (*_use_call(use, self.rng), self.rng.choice(self.prose.uses).format(x=use.value))
        target = self.rng.choice(self.recent) if self.recent and self.rng.random() < 0.6 else None
        kind = self.rng.choice(("read_file", "grep", "run", "read_file"))
        if kind == "read_file":
            path = target if target and target.endswith(".py") else filler_path(self.rng)
            return "read_file", {"path": path}, self.note("read_file", path)
        if kind == "grep":
            pattern = target if target and not target.endswith(".py") else symbol(self.rng)
            return "grep", {"pattern": pattern}, self.note("grep", pattern)
        command = f"pytest tests/{filler_path(self.rng)[4:]} -q"
        return "run", {"command": command}, self.note("run", command)

    def _output(self, tool: str, arg: str, extra: Sequence[str]) -> Output:
        comment = self.rng.choice(self.prose.log_lines)
        if tool == "read_file":
            return file_read(self.rng, arg, extra, comment)
        if tool == "grep":
            return grep(self.rng, arg, extra, comment)
        return self.rng.choice(RUNNERS)(self.rng, arg, extra, comment)


def _use_call(use: Fact, rng: random.Random) -> tuple[str, dict[str, str]]:
    """The tool call through which the agent uses a fact again (its note names the fact too)."""
    if use.kind == "path":
        return "read_file", {"path": use.value}
    if use.kind in ("command", "migration"):
        return "run", {"command": use.value}
    if use.kind == "endpoint":
        return "run", {"command": f"curl -s '{use.value}'"}
    if use.kind == "commit":
        return "run", {"command": f"git show --stat {use.value}"}
    if use.kind == "suffixed_id":
        return "grep", {"pattern": use.value}
    return "grep", {"pattern": symbol(rng)}


def _fact_lines(fact: Fact) -> list[str]:
    """How a fact shows up inside tool output (with its decoy on another line)."""
    line = {"exception": f"{fact.value}", "command": f"# to reproduce: {fact.value}",
            "migration": f"# rollback: {fact.value}", "endpoint": f"GET {fact.value} -> 502"
            }.get(fact.kind, f"{fact.kind}: {fact.value}")
    return [line] if fact.decoy is None else [line, f"{fact.kind}: {fact.decoy}"]


def generate_loop(seed: int, language: Language, target_tokens: int = 36_000) -> RecordedConversation:
    """One agent-loop conversation of about `target_tokens` tokens, in `language`."""
    rng = random.Random(f"agentloop:{seed}:{language}")
    prose = PROSE[language]
    layout = plan(rng, max(MIN_ROUNDS, target_tokens // TOKENS_PER_ROUND))
    b = Builder(rng, prose, seed)
    task = "; ".join(f"{f.kind.replace('_', ' ')} {f.value}" for f in layout.task)
    b.messages += [{"role": "system", "content": prose.system},
                   {"role": "user", "content": prose.task.format(x=task)}]
    for r in range(layout.rounds):
        if r in layout.in_follow_up:
            text = rng.choice(prose.follow_ups).format(x=layout.in_follow_up[r].value)
            b.messages.append({"role": "user", "content": text})
        shown = [line for fact in layout.in_output.get(r, ()) for line in _fact_lines(fact)]
        b.round(shown + layout.decoys.get(r, []), layout.uses.get(r))
    b.messages.append({"role": "assistant", "content": prose.final})
    return RecordedConversation(f"loop-{language}-{seed}", tuple(b.messages), tuple(b.checks), TOOLS)


def generate_loop_suite(seed: int, languages: Sequence[Language] = ("en", "pt", "zh", "ja"),
                        target_tokens: int = 36_000) -> list[RecordedConversation]:
    """One conversation per language, each from its own seeded stream."""
    return [generate_loop(seed, language, target_tokens) for language in languages]
