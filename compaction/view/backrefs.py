"""Tool results a newer message refers back to, and tool results a newer one supersedes.

Agents point back at earlier tool output in two ways, both seen in their traffic:
- Claude Code answers a repeated Read of an unchanged file with a marker instead of the content
  ("Wasted call — file unchanged since your last Read. Refer to that earlier tool_result instead.";
  older versions: "Unchanged since last read"): the earlier Read's result is what the model must see.
- the same call made again (the same file read again, the same command re-run): the newer output
  supersedes the older one (identical or not).

A call is keyed by its tool name and arguments (JSON, keys sorted; descriptive arguments such as
Claude Code's Bash `description` and `timeout` left out); a marker of a file-read tool also matches
an earlier read of the same path with other ranges. `analyze` walks the messages in order:
- `referenced`: results a marker points at (the newest earlier real output of the same call) and
  that no later real output of the call superseded since: compaction keeps them raw (bounded);
- `superseded`: older output -> the newer output of the same call that replaced it: compaction
  gives these way first, behind a pointer naming the newer copy (the original stays in the store).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from store.encoding.content import content_text

UNCHANGED = re.compile(r"unchanged since (?:your |the )?last read", re.IGNORECASE)
MARKER_MAX_CHARS = 400  # a marker is a short note, never a file's content mentioning the words
IGNORED_ARGUMENTS = frozenset({"description", "timeout", "explanation"})
PATH_ARGUMENTS = ("file_path", "path", "filePath", "absolute_path", "notebook_path")
RESULT_ROLES = ("tool", "function")


@dataclass(frozen=True)
class BackRefs:
    """Seqs of tool results: `referenced` (keep raw), `superseded` (older seq -> newer seq)."""

    referenced: frozenset[int] = frozenset()
    superseded: Mapping[int, int] = field(default_factory=dict)
    identical: frozenset[int] = frozenset()  # superseded seqs whose newer copy is the same text
    calls: Mapping[int, str] = field(default_factory=dict)  # result seq -> a short label of its call
    pointed: Mapping[int, int] = field(default_factory=dict)  # marker seq -> the result it refers to


def is_unchanged_marker(text: str) -> bool:
    """Whether a tool result is the client's "unchanged since your last Read" note."""
    return len(text) <= MARKER_MAX_CHARS and UNCHANGED.search(text) is not None


def call_key(name: str, arguments: Any) -> tuple[str, str | None]:
    """(the call's key, the path it reads or None): name plus canonical arguments."""
    parsed: Any = arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return f"{name}\x00{arguments}", None
    if not isinstance(parsed, dict):
        return f"{name}\x00{json.dumps(parsed, sort_keys=True, default=str)}", None
    kept = {k: v for k, v in parsed.items() if k not in IGNORED_ARGUMENTS}
    path = next((str(kept[k]) for k in PATH_ARGUMENTS if isinstance(kept.get(k), str)), None)
    return f"{name}\x00{json.dumps(kept, sort_keys=True, default=str)}", path


def label(name: str, path: str | None, arguments: Any) -> str:
    """A short human label of a call (`Read /a/b.py`, `Bash {"command": "pytest"}`)."""
    shown = path if path is not None else (arguments if isinstance(arguments, str) else json.dumps(arguments))
    shown = " ".join(str(shown).split())
    return f"{name} {shown[:80]}{'...' if len(shown) > 80 else ''}".strip()


def analyze(messages: Iterable[tuple[int, Mapping[str, Any]]]) -> BackRefs:
    """Back-references and superseded outputs among `(seq, message)` pairs in conversation order."""
    calls: dict[str, tuple[str, str | None, str]] = {}  # tool_call_id -> (key, path, label)
    latest: dict[str, tuple[int, str]] = {}  # call key -> (seq, text) of its newest real output
    by_path: dict[tuple[str, str], int] = {}  # (tool name, path) -> seq of its newest real output
    referenced: set[int] = set()
    superseded: dict[int, int] = {}
    identical: set[int] = set()
    labels: dict[int, str] = {}
    pointed: dict[int, int] = {}
    for seq, message in messages:
        role = message.get("role")
        if role == "assistant":
            for call in message.get("tool_calls") or ():
                if not isinstance(call, Mapping):
                    continue
                fn = call.get("function") or {}
                name = str(fn.get("name") or "")
                key, path = call_key(name, fn.get("arguments"))
                calls[str(call.get("id"))] = (key, path, label(name, path, fn.get("arguments")))
            continue
        if role not in RESULT_ROLES:
            continue
        found = calls.get(str(message.get("tool_call_id")))
        if found is None:
            continue
        key, path, text_label = found
        name = key.partition("\x00")[0]
        text = content_text(dict(message))
        labels[seq] = text_label
        if is_unchanged_marker(text):
            target = latest.get(key)
            seq_target = target[0] if target else by_path.get((name, path)) if path else None
            if seq_target is not None:
                referenced.add(seq_target)
                pointed[seq] = seq_target
            continue
        previous = latest.get(key)
        if previous is not None:
            superseded[previous[0]] = seq
            referenced.discard(previous[0])
            if previous[1] == text:
                identical.add(previous[0])
        latest[key] = (seq, text)
        if path is not None:
            by_path[(name, path)] = seq
    return BackRefs(frozenset(referenced), superseded, frozenset(identical), labels, pointed)


def analyze_stored(stored: Sequence[Any]) -> BackRefs:
    """`analyze` over StoredMessages (anything with `.seq` and `.message`), in seq order."""
    return analyze((m.seq, m.message) for m in sorted(stored, key=lambda m: m.seq))


def newly_referenced(stored: Sequence[Any]) -> frozenset[int]:
    """Results the newest round's markers refer to (the messages after the last assistant message):
    a request forwards them raw even when an earlier step summarized them."""
    ordered = sorted(stored, key=lambda m: m.seq)
    last_assistant = max((m.seq for m in ordered if m.message.get("role") == "assistant"), default=-1)
    if not any(m.seq > last_assistant and m.message.get("role") in RESULT_ROLES
               and is_unchanged_marker(content_text(dict(m.message))) for m in ordered):
        return frozenset()
    refs = analyze((m.seq, m.message) for m in ordered)
    return frozenset(t for marker, t in refs.pointed.items()
                     if marker > last_assistant and t in refs.referenced)
