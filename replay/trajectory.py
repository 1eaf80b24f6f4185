"""Real agent sessions for `ctxproxy replay` and `make eval`: the trajectory JSONL format.

One session a file: line 1 `{"meta": {...}}` (provenance; `name` names the session), line 2
`{"tools": [...]}` (the client's tool schemas), then one OpenAI chat message a line. `read_recorded`
reads this format or replay/records.py's (one conversation a line), told apart by the first line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from compaction import Message
from replay.records import RecordedConversation, bad_line, conversation_line, json_lines

Line = tuple[int, Any]  # (1-based line number, decoded JSON value)
ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


def is_trajectory_start(first: Any) -> bool:
    """Whether a file's first JSON line opens a trajectory (a `meta` object, not a conversation)."""
    return isinstance(first, Mapping) and "meta" in first and "messages" not in first and "role" not in first


def _tools(path: Path, line: Line | None) -> tuple[dict[str, Any], ...]:
    if line is None:
        return ()
    number, value = line
    tools = value.get("tools") if isinstance(value, Mapping) else None
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise bad_line(path, number, 'expected {"tools": [...]} (a list of tool schemas)')
    return tuple(tools)


def _message(path: Path, line: Line) -> Message:
    number, value = line
    if not isinstance(value, dict) or value.get("role") not in ROLES:
        raise bad_line(path, number, f"expected one chat message with a role in {sorted(ROLES)}")
    return value


def trajectory_from_lines(path: Path, lines: Sequence[Line]) -> RecordedConversation:
    """A session from its decoded lines (meta, tools, messages); no planted-fact checks."""
    number, meta = lines[0]
    if not is_trajectory_start(meta) or not isinstance(meta["meta"], Mapping):
        raise bad_line(path, number, 'expected {"meta": {...}} on the first line')
    has_tools = len(lines) > 1 and isinstance(lines[1][1], Mapping) and "tools" in lines[1][1]
    tools = _tools(path, lines[1] if has_tools else None)
    messages = tuple(_message(path, line) for line in lines[1 + has_tools:])
    if not messages:
        raise bad_line(path, number, "the session has no messages")
    return RecordedConversation(str(meta["meta"].get("name") or path.stem), messages, (), tools)


def read_recorded(path: Path) -> list[RecordedConversation]:
    """The conversations of `path` in either format (a trajectory is one conversation)."""
    lines = json_lines(path)
    if not lines:
        raise bad_line(path, 1, "the file is empty")
    if is_trajectory_start(lines[0][1]):
        return [trajectory_from_lines(path, lines)]
    return [conversation_line(path, number, raw) for number, raw in lines]
