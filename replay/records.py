"""Recorded conversations for `ctxproxy replay`: the JSONL format and its record types.

One conversation a line: `{"id", "messages", "tools"?, "checks"?}`; a check names a fact that must
survive compaction verbatim (and, for corrections, old values that must not read as current).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "fact": self.fact, "must_be_current": self.must_be_current,
                "stale_values": list(self.stale_values), "distractors": list(self.distractors)}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Check:
        return cls(str(raw["kind"]), str(raw["fact"]), bool(raw.get("must_be_current", False)),
                   tuple(raw.get("stale_values") or ()), tuple(raw.get("distractors") or ()))


@dataclass(frozen=True)
class RecordedConversation:
    """A whole recorded conversation: its messages, the client's tools and the checks to run."""

    id: str
    messages: tuple[dict[str, Any], ...]
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


def read_jsonl(path: Path) -> list[RecordedConversation]:
    """Conversations from a JSONL file (blank lines ignored); checks may be absent."""
    with path.open(encoding="utf-8") as src:
        return [RecordedConversation.from_dict(json.loads(line)) for line in src if line.strip()]
