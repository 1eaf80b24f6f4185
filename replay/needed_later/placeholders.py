"""Placeholders: forwarded text that only stands for content ctxproxy left out, and its token share.

A placeholder is, in a forwarded message's text (`store.encoding.content.message_text`):

1. a marker, counted with all the text inside it: a `[ctxproxy: ...]` note (truncation, elision,
   a cut recall result: every ctxproxy note in brackets stands for something cut), a `[... ...]`
   note (the `truncation` escalation level, tool results bounded before summarizing), or an
   `(N ... left out ...)` note (anchors over their share);
2. a husk: a block (a run of non-blank lines) that holds a marker and, markers and source headers
   (`[#12 tool]`, `[sum_... summary of messages a-b]`) left out, fewer than HUSK_CHARS letters or
   digits: the head and tail scraps truncation keeps ("Ticket [... truncated; expand 2 ...] so."),
   which say nothing by themselves. The whole block counts, its header included.

The share is placeholder tokens / forwarded message tokens (each span counted on its own with the
model's tokenizer). Engine-independent on purpose: only ctxproxy's visible output is read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from store.encoding.content import message_text

HUSK_CHARS = 16
MARKER = re.compile(r"\[ctxproxy:[^\]\n]*\]|\[\.\.\.[^\]\n]*\]|\(\d+ [^()\n]{0,80}\bleft out\b[^()\n]*\)")
_SOURCE_HEADER = re.compile(r"^\s*\[(?:#\d+|sum_\w+)[^\]\n]*\]\s*$")
_WORDISH = re.compile(r"\w")
TextCount = Callable[[str], int]


@dataclass(frozen=True)
class Placeholders:
    """Placeholder spans of one text: markers and husk lines (source headers included)."""

    markers: tuple[str, ...]
    husks: tuple[str, ...]

    def tokens(self, count_text: TextCount) -> int:
        """Tokens of every span, each counted on its own."""
        return sum(count_text(s) for s in (*self.markers, *self.husks))


def _substance(line: str) -> int:
    """Letters and digits of `line` outside markers (0 for a source header)."""
    return 0 if _SOURCE_HEADER.match(line) else len(_WORDISH.findall(MARKER.sub("", line)))


def _blocks(text: str) -> list[list[str]]:
    """Runs of non-blank lines."""
    blocks: list[list[str]] = [[]]
    for line in text.split("\n"):
        if line.strip():
            blocks[-1].append(line)
        elif blocks[-1]:
            blocks.append([])
    return [b for b in blocks if b]


def find_placeholders(text: str) -> Placeholders:
    """The markers of `text` and its husk blocks (a husk block's markers are counted with it)."""
    if "[" not in text and "left out" not in text:
        return Placeholders((), ())
    markers: list[str] = []
    husks: list[str] = []
    for block in _blocks(text):
        found = [m.group() for line in block for m in MARKER.finditer(line)]
        if not found:
            continue
        residue = sum(_substance(line) for line in block)
        if residue < HUSK_CHARS and any(MARKER.sub("", line).strip() for line in block):
            husks.append("\n".join(block))
        else:
            markers += found
    return Placeholders(tuple(markers), tuple(husks))


def placeholder_tokens(messages: Iterable[Mapping[str, Any]], count_text: TextCount) -> int:
    """Placeholder tokens across `messages`."""
    return sum(find_placeholders(message_text(m)).tokens(count_text) for m in messages)


def has_marker(text: str) -> bool:
    """Whether `text` carries any marker."""
    return MARKER.search(text) is not None
