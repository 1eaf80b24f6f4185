"""The README and the docs pages as the docs tests read them: text outside code blocks, tables, anchors."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", flags=re.MULTILINE | re.DOTALL)


def text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def pages() -> list[Path]:
    """README.md and every page under docs/."""
    return [README, *sorted(DOCS.glob("*.md"))]


def prose(page: Path) -> str:
    """The page without its fenced code blocks (a `# comment` in a shell block is no heading)."""
    return FENCE.sub("", text(page))


def table_rows(page: Path, first_cell: str) -> list[list[str]]:
    """The cells of every table row whose first cell is a backticked name matching `first_cell`."""
    rows = []
    for line in prose(page).splitlines():
        if re.match(rf"^\| `{first_cell}` \|", line):
            rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    plain = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", plain).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of `page` (a repeated heading gets -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", prose(page), flags=re.MULTILINE):
        base = slug(heading)
        count = seen.get(base, 0)
        out.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return out


def links(page: Path) -> list[str]:
    """Targets of every markdown link and image outside code blocks."""
    return re.findall(r"!?\[[^\]]*\]\(([^)\s]+)(?: \"[^\"]*\")?\)", prose(page))
