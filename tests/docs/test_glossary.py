"""docs/glossary.md defines each term once, covers the words the code and docs rely on, and is linked."""

from __future__ import annotations

import re

from tests.docs.pages import DOCS, README, links, text

GLOSSARY = DOCS / "glossary.md"
REQUIRED = ("turn", "conversation", "tenant", "view", "entry", "slot", "step", "pass", "level", "anchor",
            "recall", "passthrough", "early forward", "fork", "summary", "chunk", "fresh tail", "budget",
            "window", "leaf", "resend", "prefix reuse")


def defined() -> list[str]:
    """Every term a bullet of the glossary opens with (`- **term**`), nested bullets included."""
    return re.findall(r"^\s*- \*\*([^*]+)\*\*", text(GLOSSARY), flags=re.MULTILINE)


def test_each_term_is_defined_once() -> None:
    terms = defined()
    assert sorted({t for t in terms if terms.count(t) > 1}) == []


def test_the_required_terms_are_defined() -> None:
    assert sorted(set(REQUIRED) - set(defined())) == []


def test_readme_and_architecture_link_the_glossary() -> None:
    for page in (README, DOCS / "architecture.md"):
        assert any(t.split("#", 1)[0].endswith("glossary.md") for t in links(page)), page.name
