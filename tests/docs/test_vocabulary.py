"""The code explains itself in one vocabulary: no citations of documents outside the repository, one
spelling of summarizer in every identifier (docs/glossary.md)."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("proxy", "compaction", "store", "config", "replay", "bench")
# A planning document, a numbered issue or a specification article named as the reason for the code.
HISTORY = re.compile(r"\bseed ?0\d\d\b|\bissue ?#?\d+\b|\bdesign: |\bdesign\.md\b|\(design\b", re.IGNORECASE)


def sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_no_history_citations(package: str) -> None:
    cited = [f"{path.relative_to(ROOT)}:{n}" for path in sources(package)
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if HISTORY.search(line)]
    assert cited == []


@pytest.mark.parametrize("package", PACKAGES)
def test_identifiers_spell_summarizer_one_way(package: str) -> None:
    british = []
    for path in sources(package):
        tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
        british += [f"{path.relative_to(ROOT)}:{t.start[0]} {t.string}" for t in tokens
                    if t.type == tokenize.NAME and "summaris" in t.string.lower()]
    assert british == []


def test_the_check_finds_a_citation() -> None:
    assert HISTORY.search("# as seed 002 says") and HISTORY.search("(design: Budget)")
    assert not HISTORY.search("the design of the budget")
