"""Recorded conversations for `ctxproxy replay`: the JSONL format and its record types.

One conversation a line: `{"id", "messages", "tools"?, "checks"?}`; a check names a fact that must
survive compaction verbatim (and, for corrections, old values that must not read as current), and
may say where the agent uses it again (`used_at`, the index of that assistant message). A line
without `id` is OpenAI's fine-tuning format, `{"messages", "tools"?}`: its id is its line number
(`line-3`) and the training-only `weight` of its messages is dropped.
Real agent sessions come in another format; replay/trajectory.py reads either.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compaction import Message
from config.errors import InvalidRequestError

FORMATS = ('expected {"messages": [...]} (OpenAI fine-tuning) or {"id", "messages", "tools"?, "checks"?} '
           "(a recorded conversation)")
NOT_MESSAGES = "messages must be a list of chat messages, each an object with a role"
TRAINING_KEYS = frozenset({"weight"})


@dataclass(frozen=True)
class Check:
    """One retention check: `fact` must be verbatim in the final forwarded context.

    `stale_values` must not be presented as current (a correction's old value, a discarded
    hypothesis); `distractors` are near-identical values that are legitimately in the history.
    """

    kind: str
    fact: str
    must_be_current: bool = False
    stale_values: tuple[str, ...] = ()
    distractors: tuple[str, ...] = ()
    used_at: int | None = None  # index of the assistant message that uses the fact again

    def to_dict(self) -> dict[str, Any]:
        out = {"kind": self.kind, "fact": self.fact, "must_be_current": self.must_be_current,
               "stale_values": list(self.stale_values), "distractors": list(self.distractors)}
        return out if self.used_at is None else {**out, "used_at": self.used_at}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Check:
        used_at = raw.get("used_at")
        return cls(str(raw["kind"]), str(raw["fact"]), bool(raw.get("must_be_current", False)),
                   tuple(raw.get("stale_values") or ()), tuple(raw.get("distractors") or ()),
                   None if used_at is None else int(used_at))


@dataclass(frozen=True)
class RecordedConversation:
    """A whole recorded conversation: its messages, the client's tools and the checks to run."""

    id: str
    messages: tuple[Message, ...]
    checks: tuple[Check, ...]
    tools: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "messages": list(self.messages), "tools": list(self.tools),
                "checks": [c.to_dict() for c in self.checks]}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> RecordedConversation:
        return cls(str(raw["id"]), tuple(raw["messages"]),
                   tuple(Check.from_dict(c) for c in raw.get("checks") or ()),
                   tuple(raw.get("tools") or ()))


def write_jsonl(path: Path, conversations: Iterable[RecordedConversation]) -> None:
    """One conversation a line (parent directories created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for conv in conversations:
            out.write(json.dumps(conv.to_dict(), ensure_ascii=False) + "\n")


def bad_line(path: Path, number: int, why: str) -> InvalidRequestError:
    """The error for one malformed line of a replay file, naming the file and the line."""
    return InvalidRequestError(f"{path}:{number}: {why}", param=f"line {number}", code="invalid_replay_file")


def json_lines(path: Path) -> list[tuple[int, Any]]:
    """(line number, decoded JSON) of every non-blank line; a malformed line is an error naming it."""
    out: list[tuple[int, Any]] = []
    with path.open(encoding="utf-8") as src:
        for number, line in enumerate(src, 1):
            if line.strip():
                try:
                    out.append((number, json.loads(line)))
                except ValueError as exc:
                    raise bad_line(path, number, f"not JSON ({exc})") from None
    return out


def _chat_messages(value: Any) -> bool:
    """Whether `value` is a list of objects with a role (the engine checks the rest)."""
    return isinstance(value, list) and all(
        isinstance(m, Mapping) and isinstance(m.get("role"), str) for m in value)


def _finetune_example(number: int, raw: Mapping[str, Any]) -> dict[str, Any]:
    """A fine-tuning line as a recorded conversation: numbered by its line, training keys dropped."""
    messages = [{k: v for k, v in m.items() if k not in TRAINING_KEYS} for m in raw["messages"]]
    return {**raw, "id": f"line-{number}", "messages": messages}


def conversation_line(path: Path, number: int, raw: Any) -> RecordedConversation:
    """One line of the conversations format (`{id, messages, tools?, checks?}`) or a fine-tuning line."""
    if not isinstance(raw, Mapping) or "messages" not in raw:
        raise bad_line(path, number, FORMATS)
    if not _chat_messages(raw["messages"]):
        raise bad_line(path, number, NOT_MESSAGES)
    try:
        return RecordedConversation.from_dict(dict(raw) if "id" in raw else _finetune_example(number, raw))
    except (KeyError, TypeError, ValueError) as exc:
        raise bad_line(path, number, f"{FORMATS} ({exc!r})") from None


def read_jsonl(path: Path) -> list[RecordedConversation]:
    """Conversations from a JSONL file, one a line (blank lines ignored); checks may be absent."""
    return [conversation_line(path, number, raw) for number, raw in json_lines(path)]
