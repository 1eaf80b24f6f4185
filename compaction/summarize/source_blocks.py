"""A summarizer's source text, block by block, and the truncation level that keeps whole blocks.

`prompts.build_source_text` writes one block per message or summary: a header line `[#<id> <role>]`
or `[sum_<id> summary of messages a-b]`, then its text. The last level of the fallback chain keeps
whole blocks (user and assistant text first, newest first) within the size asked, and names every
block it leaves out in ONE pointer line saying where they are (no tool is named: a summary is
forwarded whether or not the request offers the recall tools). A block is never cut: a
summary made of six-character husks of every message costs tokens and says nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from compaction.tokens import TokenCounter

POINTER_OPEN = "[ctxproxy: "
_BLOCK_HEADER = re.compile(r"(?m)^\[(?:#(\d+) (\w+)|(sum_\w+) summary[^\]]*)\]$")
_ROLE_RANK = {"user": 0, "assistant": 1, "summary": 2}  # tool results and the rest come last


@dataclass(frozen=True)
class Block:
    """One source block: its header line, the id it names, the role, and its text."""

    header: str
    ref: str  # message id (decimal), summary id, or "" for text without headers
    role: str
    body: str

    @property
    def text(self) -> str:
        return f"{self.header}\n{self.body}".strip()


def blocks(sources_text: str) -> list[Block]:
    """The blocks of `sources_text`, in order; one anonymous block when there are no headers."""
    headers = list(_BLOCK_HEADER.finditer(sources_text))
    if not headers:
        return [Block("", "", "", sources_text.strip())] if sources_text.strip() else []
    out = []
    for index, match in enumerate(headers):
        end = headers[index + 1].start() if index + 1 < len(headers) else len(sources_text)
        ref = match.group(1) or match.group(3) or ""
        role = match.group(2) or "summary"
        out.append(Block(match.group(), ref, role, sources_text[match.end():end].strip()))
    return out


def pointer_line(refs: Sequence[str]) -> str:
    """The one line standing for omitted blocks: how many, their ids, where they are."""
    named = compact_ids(refs)
    what = f"{len(refs)} source{'s' if len(refs) != 1 else ''} omitted"
    ids = f" (ids {named})" if named else ""
    return f"{POINTER_OPEN}{what}{ids}; they are kept in the stored history]"


def compact_ids(refs: Sequence[str]) -> str:
    """`12-18, 20, sum_ab12` for the given ids (consecutive message ids as ranges)."""
    numbers = sorted({int(r) for r in refs if r.isdecimal()})
    parts: list[str] = []
    for n in numbers:
        if parts and parts[-1].split("-")[-1] == str(n - 1):
            parts[-1] = f"{parts[-1].split('-')[0]}-{n}"
        else:
            parts.append(str(n))
    return ", ".join(parts + [r for r in refs if r and not r.isdecimal()])


def truncate_sources(sources_text: str, limit_tokens: int, counter: TokenCounter) -> str:
    """Whole blocks of `sources_text` within `limit_tokens`, the others behind one pointer line.

    Deterministic; "" only when not even the pointer line fits (or there is no text at all).
    """
    items = blocks(sources_text)
    if not items or limit_tokens <= 0:
        return ""
    order = sorted(range(len(items)), key=lambda i: (_ROLE_RANK.get(items[i].role, 3), -i))
    kept: set[int] = set()
    for i in order:
        if counter.count_text(render(items, kept | {i})) <= limit_tokens:
            kept.add(i)
    text = render(items, kept)
    return text if counter.count_text(text) <= limit_tokens else ""


def render(items: Sequence[Block], kept: set[int]) -> str:
    """Kept blocks in source order; the pointer line where the first omitted block was."""
    omitted = [b.ref for i, b in enumerate(items) if i not in kept]
    parts: list[str] = []
    pointer_placed = False
    for i, block in enumerate(items):
        if i in kept:
            parts.append(block.text)
        elif not pointer_placed:
            parts.append(pointer_line(omitted))
            pointer_placed = True
    return "\n\n".join(parts)
