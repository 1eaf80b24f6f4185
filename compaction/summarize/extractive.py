"""`local/extractive`: a structured summary copied from its sources, no model (it cannot invent).

The second level of the fallback chain (LLM -> extractive -> truncation), so it must be useful on
agent traffic: the intent (the user's words), decisions, the files the agent touched with what it
did to them, errors with their message and the fixes, open operations (a call without a result, a
pending approval), the last state of the task, and an expand line naming the messages to open.
Every line is copied from the sources: a sentence or line verbatim, a tool call's name with its key
argument verbatim, an error line verbatim; each line is also checked with the verifier, so the
output passes verification by construction. Deterministic, and within the requested tokens:
candidates are taken section by section in rank order until the target is reached.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from compaction.anchors.index import bounded, command_files, command_line, error_lines
from compaction.offload import off_loop
from compaction.summarize.prompts import EXPAND_LINE_PREFIX, SECTIONS
from compaction.summarize.verify import FactChecker
from compaction.tokens import TokenCounter
from compaction.types import SummaryRequest
from config.settings import LOCAL_EXTRACTIVE

MAX_LINE_CHARS = 240
EXPAND_ITEMS = 6
_HEADER = re.compile(r"^\[(#\d+) (\w+)\]$|^\[(sum_\w+) summary[^\]]*\]$")
_TOOL_CALL = re.compile(r"^([A-Za-z_][\w.-]*)\((\{.*\})\)$")
_SENTENCE = re.compile(r"[^\n]+?(?:[.!?](?=\s|$)|$)")
_CUT_MARKER = re.compile(r"^\[\.\.\. .* (?:cut|truncated)")
_SECTION_TITLE = re.compile(r"^#{1,3}\s+(.+?)\s*$")
_DECISION = re.compile(r"(?i)\b(?:decided|decision|let's go with|we(?:'ll| will) use|agreed to|approved"
                       r"|chose|going with|the plan is|the fix is to|instead of)\b")
_FIX = re.compile(r"(?i)\b(?:fixed|fixes|the fix|resolved|now pass(?:es)?|all \d+ tests pass|tests pass"
                  r"|passed|works now|no longer fails)\b")
_OPEN = re.compile(r"(?i)\b(?:pending|waiting|awaiting|approval|approve|todo|blocked|not yet"
                   r"|unknown status|in[ _]progress|running in background|still running|timed out)\b")
_PLAN = re.compile(r"(?i)\b(?:next|will|let me|i'll|now i|going to|remaining|still need|todo)\b")
_NOT_INTENT = re.compile(r"^(?:<[^>]*>.*|#+ .*|<!--.*|.{0,80}:)$")  # tags, headings, lead-ins
_KEY_ARGUMENTS = ("command", "cmd", "file_path", "path", "filename", "notebook_path", "pattern",
                  "query", "url", "description", "prompt", "skill", "task_id")
_WRITE_TOOLS = re.compile(r"(?i)edit|write|create|patch|replace|insert")


@dataclass(frozen=True)
class Block:
    """One source block: a message (`#12`, its role) or an earlier summary (`sum_...`)."""

    ref: str
    role: str
    body: str


@dataclass
class _Candidates:
    """Lines per section, in rank order, and message references per expand topic."""

    lines: dict[str, list[str]] = field(default_factory=lambda: {s: [] for s in SECTIONS})
    topics: dict[str, list[str]] = field(default_factory=dict)
    calls: dict[str, list[str]] = field(default_factory=dict)  # call line -> message refs
    errors: dict[str, list[str]] = field(default_factory=dict)  # error line -> message refs

    def add(self, section: str, line: str) -> None:
        if line not in self.lines[section]:
            self.lines[section].append(line)

    def call(self, line: str, ref: str) -> None:
        """A tool call's line, with every message that made the same call."""
        self.calls.setdefault(line, [])
        if ref not in self.calls[line]:
            self.calls[line].append(ref)
        self.topic(line.split(": ", 1)[-1][:80], ref)

    def topic(self, name: str, ref: str) -> None:
        refs = self.topics.setdefault(name, [])
        if ref and ref not in refs:
            refs.append(ref)


def parse_blocks(source: str) -> list[Block]:
    """The blocks of a summarizer source text (one anonymous user block when there are no headers)."""
    blocks: list[Block] = []
    ref, role = "", "user"
    body: list[str] = []
    for line in source.splitlines():
        header = _HEADER.match(line.strip())
        if header:
            if body or ref:
                blocks.append(Block(ref, role, "\n".join(body).strip()))
            ref = header.group(1) or header.group(3) or ""
            role, body = header.group(2) or "summary", []
        else:
            body.append(line)
    if body or ref:
        blocks.append(Block(ref, role, "\n".join(body).strip()))
    return blocks


def _prose_lines(body: str) -> Iterator[str]:
    """Prose sentences of a message body: no tool-call lines, code fences or cut markers."""
    fenced = commented = False
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
            continue
        if stripped.startswith("<!--") or commented:
            commented = "-->" not in stripped
            continue
        if fenced or not stripped or _TOOL_CALL.match(stripped) or _CUT_MARKER.match(stripped):
            continue
        for sentence in _SENTENCE.findall(stripped):
            text = bounded(sentence.strip(), MAX_LINE_CHARS)
            if len(text) >= 12:
                yield text


def _tool_calls(body: str) -> Iterator[tuple[str, dict[str, object]]]:
    for line in body.splitlines():
        match = _TOOL_CALL.match(line.strip())
        if match:
            try:
                arguments = json.loads(match.group(2))
            except ValueError:
                continue
            if isinstance(arguments, dict):
                yield match.group(1), arguments


def _call_line(name: str, arguments: dict[str, object]) -> str | None:
    """`Bash command: pytest -x tests/` - a call's name and its key argument, both verbatim."""
    for key in _KEY_ARGUMENTS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            text = command_line(value, MAX_LINE_CHARS - len(name) - len(key) - 4)
            return f"{name} {key}: {text}" if text else None
    return None


def _with_ref(line: str, ref: str) -> str:
    return f"- {line} ({ref})" if ref else f"- {line}"


def _from_message(block: Block, out: _Candidates, files: dict[str, dict[str, list[str]]]) -> None:
    prose = list(_prose_lines(block.body)) if block.role in ("user", "assistant") else []
    if block.role == "user":
        for sentence in [s for s in prose if not _NOT_INTENT.match(s)][:2]:
            out.add("Intent", _with_ref(sentence, block.ref))
    for sentence in prose:
        for section, pattern in (("Decisions", _DECISION), ("Errors and fixes", _FIX),
                                 ("Open operations and approvals", _OPEN)):
            if pattern.search(sentence):
                out.add(section, _with_ref(sentence, block.ref))
                break
    for error in error_lines(block.body, inline=block.role != "tool"):
        line = bounded(error, MAX_LINE_CHARS)
        if line:
            out.errors.setdefault(line, []).append(block.ref)
            out.topic(bounded(error, 60) or line, block.ref)
    for name, arguments in _tool_calls(block.body):
        _note_call(name, arguments, block.ref, out, files)


def _note_call(name: str, arguments: dict[str, object], ref: str, out: _Candidates,
               files: dict[str, dict[str, list[str]]]) -> None:
    """A file-tool call names its file; any other call is kept as its key argument (a command), and
    the files a command names are noted too."""
    path = next((v for k in ("file_path", "path", "filename", "notebook_path")
                 if isinstance(v := arguments.get(k), str) and v.strip() and "\n" not in v), None)
    if path is not None:
        action = "edited" if _WRITE_TOOLS.search(name) else "read"
        files.setdefault(path, {}).setdefault(action, []).append(ref)
        out.topic(path, ref)
        return
    line = _call_line(name, arguments)
    if line is not None:
        out.call(line, ref)
    command = arguments.get("command") or arguments.get("cmd")
    for _kind, action, value in command_files(command) if isinstance(command, str) else ():
        files.setdefault(value, {}).setdefault(action, []).append(ref)


def _from_summary(block: Block, out: _Candidates) -> None:
    """An earlier summary's section lines go to the same sections, verbatim."""
    section = ""
    for line in block.body.splitlines():
        title = _SECTION_TITLE.match(line.strip())
        if title:
            section = next((s for s in SECTIONS if s.lower() == title.group(1).lower()), "")
            continue
        stripped = line.strip()
        if section and stripped not in ("", "- none") and not stripped.startswith(EXPAND_LINE_PREFIX):
            out.add(section, bounded(stripped, MAX_LINE_CHARS))
    out.topic(block.ref, "")


def _file_lines(files: dict[str, dict[str, list[str]]]) -> list[str]:
    """`- src/a.py: edited (#41, #43), read (#12)`, edited files first, newest first."""
    def newest(refs: dict[str, list[str]]) -> int:
        return max((int(r[1:]) for rs in refs.values() for r in rs if r[1:].isdigit()), default=0)
    ranked = sorted(files.items(), key=lambda kv: ("edited" not in kv[1], -newest(kv[1]), kv[0]))
    return [f"- {path}: " + ", ".join(f"{action} ({', '.join(dict.fromkeys(refs))})"
                                      for action, refs in sorted(actions.items()))
            for path, actions in ranked]


def _number(ref: str) -> int:
    return int(ref[1:]) if ref[1:].isdigit() else 0


def _call_lines(calls: dict[str, list[str]]) -> list[str]:
    """Tool calls, repeated ones first, then the newest."""
    ranked = sorted(enumerate(calls.items()), key=lambda e: (-len(e[1][1]), -e[0]))
    return [f"- {line} ({', '.join(refs[-4:])})" for _, (line, refs) in ranked]


def candidates(source: str) -> _Candidates:
    """Every candidate line of every section, ranked, plus the expand topics."""
    out = _Candidates()
    files: dict[str, dict[str, list[str]]] = {}
    blocks = parse_blocks(source)
    for block in blocks:
        if block.role == "summary":
            _from_summary(block, out)
        else:
            _from_message(block, out, files)
    out.lines["Files and artifacts"] = _file_lines(files) + _call_lines(out.calls) + \
        out.lines["Files and artifacts"]
    out.lines["Errors and fixes"].reverse()  # the newest fixes first, after the newest errors
    errors = sorted(out.errors.items(), key=lambda kv: -max(_number(r) for r in kv[1]))
    out.lines["Errors and fixes"][:0] = [f"- {line} ({', '.join(refs[-4:])})" for line, refs in errors]
    out.lines["Next steps"] = _last_state(blocks)
    return out


def _last_state(blocks: list[Block]) -> list[str]:
    """The last state of the task: the newest assistant message's closing sentences, then the plans
    of the newest messages."""
    said = [(b.ref, list(_prose_lines(b.body))) for b in blocks if b.role == "assistant"]
    said = [(ref, sentences) for ref, sentences in said if sentences][-3:]
    tail = [_with_ref(s, ref) for ref, sentences in reversed(said) for s in sentences[-1:]]
    tail += [_with_ref(s, ref) for ref, sentences in reversed(said) for s in sentences if _PLAN.search(s)]
    return list(dict.fromkeys(tail))[:6]


class ExtractiveSummarizer:
    """`local/extractive`: deterministic, verifiable, structured (see the module docstring)."""

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self._counter = counter

    @property
    def name(self) -> str:
        return LOCAL_EXTRACTIVE

    async def complete(self, request: SummaryRequest) -> str:
        source = source_from_prompt(request.user_prompt)
        return await off_loop(len(source), self.summarize, source, request.target_tokens)

    def summarize(self, source: str, target_tokens: int) -> str:
        """Structured summary of `source` in at most about `target_tokens` tokens."""
        counter = self._counter or TokenCounter.for_model("")
        found = candidates(source)
        checker = FactChecker(source)
        expand = _expand_line(found, counter, max(24, target_tokens // 8), checker)
        chosen: dict[str, list[str]] = {s: [] for s in SECTIONS}
        used = counter.count_text(_render(chosen, expand))
        for section, line in _round_robin(found.lines):
            cost = counter.count_text(line) + 1
            if not chosen[section]:  # the section's heading comes with its first line
                cost += counter.count_text(f"## {section}") + 1
            if used + cost <= target_tokens and not checker.unsupported(line):
                chosen[section].append(line)
                used += cost
        return _render(chosen, expand)


_PRIORITY = ("Intent", "Next steps", "Errors and fixes", "Files and artifacts",
             "Open operations and approvals", "Decisions")


def _round_robin(lines: dict[str, list[str]]) -> list[tuple[str, str]]:
    """One line of each section in turn (intent, last state and errors first)."""
    order: list[tuple[str, str]] = []
    depth = max((len(v) for v in lines.values()), default=0)
    for index in range(depth):
        order += [(s, lines[s][index]) for s in _PRIORITY if index < len(lines[s])]
    return order


def _expand_line(found: _Candidates, counter: TokenCounter, max_tokens: int,
                 checker: FactChecker) -> str:
    """`Expand for details about: src/a.py (#12, #40), KeyError: 'x' (#33)` - the busiest topics."""
    ranked = sorted(found.topics.items(), key=lambda kv: -len(kv[1]))
    items: list[str] = []
    for name, refs in ranked[:EXPAND_ITEMS]:
        item = f"{name} ({', '.join(refs[-3:])})" if refs else name
        if checker.unsupported(item):
            continue
        if counter.count_text(", ".join([*items, item])) > max_tokens:
            break
        items.append(item)
    return f"{EXPAND_LINE_PREFIX} {', '.join(items) or 'the messages above'}"


def _render(chosen: dict[str, list[str]], expand: str) -> str:
    """The sections that hold lines, in SECTIONS order (an empty heading is tokens spent on nothing:
    a small summary's room goes to its lines), then the expand line."""
    body = [f"## {s}\n" + "\n".join(chosen[s]) for s in SECTIONS if chosen[s]]
    return "\n".join([*body, expand])


def source_from_prompt(user_prompt: str) -> str:
    """The `<text>` part of a summarizer user prompt (the whole prompt if not delimited)."""
    start, end = user_prompt.find("<text>\n"), user_prompt.rfind("\n</text>")
    return user_prompt[start + 7:end] if start >= 0 and end > start else user_prompt
