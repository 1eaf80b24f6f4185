"""docs/architecture.md lists every module of the packages, and names only modules that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
PACKAGES = ("config", "store", "compaction", "replay", "proxy")


def modules() -> set[str]:
    return {str(p.relative_to(ROOT)) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
            if p.name != "__init__.py"}


def test_every_module_is_listed() -> None:
    listed = set(re.findall(r"^\| `([a-z_/]+\.py)` \|", DOC, flags=re.MULTILINE))
    assert sorted(modules() - listed) == []


def test_the_doc_names_no_module_that_does_not_exist() -> None:
    named = set(re.findall(r"`((?:config|store|compaction|replay|proxy)/[a-z_/]+\.py)`", DOC))
    assert sorted(named - modules()) == []


def test_the_life_of_a_request_names_a_module_for_each_hop() -> None:
    section = DOC.split("## Life of a request", 1)[1].split("\n## ", 1)[0]
    hops = re.findall(r"^\d+\. (.+?)(?=^\d+\. |\Z)", section, flags=re.MULTILINE | re.DOTALL)
    assert len(hops) >= 6 and all(re.search(r"`(?:proxy|compaction|store)/[a-z_/]+\.py`", h) for h in hops)
