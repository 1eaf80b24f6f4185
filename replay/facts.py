"""Conversation-end checks of a replay: planted facts kept, corrections current, nothing invented.

Independent of compaction.summarize.verify on purpose (their own simple rules), so a bug shared by the
engine and its verifier cannot hide itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from compaction import Message
from replay.checks import context_text, synthetic_messages
from replay.needed_later.texts import readable_text
from replay.records import Check
from store.encoding.content import message_text

ANCHOR_MARK = "<ctxproxy:anchors>"
# A line mentioning an old value is not "presenting it as current" when it says so.
_SUPERSEDED = re.compile(r"(?i)supersed|\bwas\b|previous|\bold\b|\bnot\b|no longer|instead|"
                         r"correct|ruled out|discard|reject|hypothes|\bformer|replaced|earlier")
# A summary line asserting a value as the state of things (rather than narrating history).
_ASSERTING = re.compile(r"(?i)decision|decided|\bcurrent|\bnow\b|\bfinal\b|confirmed|going with")
# ctxproxy's own markers and ids are not facts about the conversation.
_OWN_MARKUP = re.compile(r"\[ctxproxy:[^\]]*\]|</?ctxproxy:[^>]*>|\bsum_[0-9a-f]{6,}\b")
_FACTLIKE = re.compile(
    r"https?://\S+[^\s.,;:)]"
    r"|[\w.+-]+@[\w-]+\.[\w.]+"
    r"|(?:[\w.-]+/)+[\w-]+\.\w+"
    r"|\b\d{4}-\d{2}-\d{2}\b"
    r"|[$€£]\s?\d[\d,]*(?:\.\d+)?"
    r"|\b\d+(?:\.\d+)?\s?(?:kg|g|km|GB|MB|seconds|ms)\b"
    r"|\b[A-Z][A-Z0-9]*[-_]\d+[A-Z0-9_-]*\b"
    r"|\b\d{1,3}(?:,\d{3})+(?:\.\d+)?\b|\b\d{4,}\b")


@dataclass(frozen=True)
class FactResult:
    """One planted fact at the end of a conversation: present, and current when it must be."""

    kind: str
    fact: str
    present: bool
    must_be_current: bool
    stale_as_current: tuple[str, ...]  # old values the ctxproxy blocks present as current

    @property
    def current(self) -> bool:
        return self.present and not self.stale_as_current

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "fact": self.fact, "present": self.present,
                "must_be_current": self.must_be_current, "current": self.current,
                "stale_as_current": list(self.stale_as_current)}


def _stale_lines(text: str, stale: str, asserting: re.Pattern[str] | None) -> bool:
    """Some line shows `stale` without saying it is old (and, if given, while asserting it)."""
    return any(stale in line and not _SUPERSEDED.search(line)
               and (asserting is None or asserting.search(line)) for line in text.splitlines())


def stale_as_current(check: Check, synthetic: Sequence[Message]) -> tuple[str, ...]:
    """Old values ctxproxy's own messages present as current: any unmarked line of the anchor block
    (its header says values are current), or a summary line promoting it to a decision."""
    found: list[str] = []
    for stale in check.stale_values:
        for message in synthetic:
            text = message_text(message)
            if _stale_lines(text, stale, None if ANCHOR_MARK in text else _ASSERTING):
                found.append(stale)
                break
    return tuple(found)


def check_facts(final_forwarded: Sequence[Message], history: Sequence[Message],
                checks: Sequence[Check]) -> list[FactResult]:
    """Each planted fact: verbatim in the final forwarded context, and current when it must be."""
    text = context_text(final_forwarded)
    synthetic = synthetic_messages(final_forwarded, history)
    return [FactResult(c.kind, c.fact, c.fact in text, c.must_be_current,
                       stale_as_current(c, synthetic) if c.must_be_current else ())
            for c in checks]


def fact_like_tokens(text: str) -> set[str]:
    """Numbers, amounts, ids, dates, paths, emails and URLs of `text` (ctxproxy markup removed)."""
    return {m.group().strip() for m in _FACTLIKE.finditer(_OWN_MARKUP.sub(" ", text))}


def invented_facts(forwarded: Sequence[Message], history: Sequence[Message]) -> list[str]:
    """Fact-like tokens of ctxproxy-made messages that occur nowhere in the full history (its text
    read with tool-call arguments decoded too: a summary may quote `"a b"` where the raw JSON
    arguments hold `\\"a b\\"`)."""
    source = "\n".join(readable_text(m) for m in history)
    tokens: set[str] = set()
    for message in synthetic_messages(forwarded, history):
        tokens |= fact_like_tokens(message_text(message))
    return sorted(t for t in tokens if t not in source)
