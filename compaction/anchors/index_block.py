"""The agent index part of the anchor block: one line per section, items with message references.

`files under /repo/: src/a.py (edited #41 #43, read #12), tests/test_a.py (read #45)`: the files the
agent touched (paths under the directory most of them share are shown relative to it, the directory
written once), then the symbols, the errors and the commands, each with the messages they came from
so the model can expand them. Items are ranked for an agent: the newest errors, the files it edited,
commands it repeated, symbols it defined, then files it only read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from compaction.anchors.index import Action, parse_index_key
from store.models import Anchor

INDEX_SECTIONS = ("errors", "files", "commands", "symbols")
SECTION_CAPS = {"errors": 8, "files": 30, "commands": 8, "symbols": 20}
MAX_REFS = 4  # references shown per item: the first and the newest ones
_ACTION_ORDER: tuple[Action, ...] = ("edited", "read", "ran", "seen")
_MULTILINE = frozenset({"errors", "commands"})  # values with commas and spaces: one per line


@dataclass(frozen=True)
class IndexItem:
    """One indexed value and every (action, message id) it came from, oldest first."""

    kind: str
    value: str
    refs: tuple[tuple[Action, int], ...]

    @property
    def last(self) -> int:
        return self.refs[-1][1] if self.refs else 0

    @property
    def edited(self) -> bool:
        return any(action == "edited" for action, _ in self.refs)


@dataclass(frozen=True)
class IndexLine:
    """A rendered item: its rank, the section it belongs to, and its text."""

    priority: tuple[int, ...]
    section: str
    text: str


def build_index(anchors: Sequence[Anchor]) -> list[IndexItem]:
    """Index anchors grouped by (kind, value), in first-seen order."""
    refs: dict[tuple[str, str], set[tuple[Action, int]]] = {}
    for anchor in anchors:
        action, message_id = parse_index_key(anchor.key)
        ref = message_id if message_id is not None else anchor.source_message_id
        refs.setdefault((anchor.kind, anchor.value), set())
        if ref is not None:
            refs[(anchor.kind, anchor.value)].add((action, ref))
    return [IndexItem(kind, value, tuple(sorted(found, key=lambda r: (r[1], r[0]))))
            for (kind, value), found in refs.items()]


def _priority(item: IndexItem) -> tuple[int, ...]:
    if item.kind == "error":
        return (2, -item.last)
    if item.kind == "file":
        return (4, -item.last) if item.edited else (7, -item.last)
    if item.kind == "command":
        return (5, 0 if len(item.refs) > 1 else 1, -item.last)
    return (6, 0 if item.edited else 1, -len(item.refs), -item.last)


def _refs_text(refs: tuple[tuple[Action, int], ...]) -> str:
    """`edited #41 #43, read #12`: message ids grouped by action (the first and newest ones)."""
    parts: list[str] = []
    listed: set[int] = set()
    for action in _ACTION_ORDER:
        ids = sorted({ref for act, ref in refs if act == action} - listed)
        listed.update(ids)
        if not ids:
            continue
        shown = [f"#{i}" for i in ids] if len(ids) <= MAX_REFS else \
            [f"#{ids[0]}", "...", *(f"#{i}" for i in ids[-(MAX_REFS - 1):])]
        label = f"{action} " if action in ("edited", "read") or (action == "seen" and parts) else ""
        parts.append(label + " ".join(shown))
    return ", ".join(parts)


def common_directory(paths: Sequence[str]) -> str:
    """The directory (ending in "/") that saves the most characters when written once for the
    absolute paths under it; "" when none is shared by at least two paths."""
    counts: Counter[str] = Counter()
    for path in paths:
        if path.startswith("/"):
            parts = path.split("/")
            counts.update("/".join(parts[:depth]) + "/" for depth in range(3, len(parts)))
    best = max(((len(d) * (n - 1), d) for d, n in counts.items() if n >= 2), default=(0, ""))
    return best[1]


def _merged_files(items: Sequence[IndexItem], directory: str) -> list[IndexItem]:
    """Relative paths merged into their absolute form under `directory` (one item per file)."""
    absolute = {i.value for i in items if i.kind == "file"}
    merged: dict[tuple[str, str], set[tuple[Action, int]]] = {}
    for item in items:
        value = item.value
        if item.kind == "file" and directory and directory + value in absolute:
            value = directory + value
        merged.setdefault((item.kind, value), set()).update(item.refs)
    return [IndexItem(kind, value, tuple(sorted(refs, key=lambda r: (r[1], r[0]))))
            for (kind, value), refs in merged.items()]


def index_items(items: Sequence[IndexItem]) -> list[IndexLine]:
    """The ranked lines of every index section (each section capped)."""
    directory = common_directory([i.value for i in items if i.kind == "file"])
    items = _merged_files(items, directory)
    lines: list[IndexLine] = []
    for section, kind in zip(INDEX_SECTIONS, ("error", "file", "command", "symbol"), strict=True):
        ranked = sorted((i for i in items if i.kind == kind), key=_priority)[:SECTION_CAPS[section]]
        for item in ranked:
            value, name = item.value, section
            if kind == "file" and directory and value.startswith(directory):
                value, name = value[len(directory):], f"files under {directory}"
            lines.append(IndexLine(_priority(item), name, f"{value} ({_refs_text(item.refs)})"))
    return lines


def section_line(section: str, items: Sequence[str]) -> str:
    """`files: a (#1), b (#2)`; errors and commands one per line."""
    if section in _MULTILINE:
        return "\n".join([f"{section}:", *(f"  - {item}" for item in items)])
    return f"{section}: {', '.join(items)}"
