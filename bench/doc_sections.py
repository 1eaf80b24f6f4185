"""docs/results.md is shared by `make eval` and `make bench`: each owns one delimited section."""

from __future__ import annotations

from pathlib import Path

DOC_TITLE = "# ctxproxy results\n"


def replace_section(doc: Path, begin: str, end: str, section: str) -> Path:
    """Replace the text between `begin` and `end` (markers included in `section`), or append it."""
    old = doc.read_text(encoding="utf-8") if doc.exists() else DOC_TITLE
    if begin in old and end in old:
        head, _, rest = old.partition(begin)
        _, _, tail = rest.partition(end)
        text = head + section + tail
    else:
        text = old.rstrip("\n") + "\n\n" + section + "\n"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(text, encoding="utf-8")
    return doc
