"""store/query/snippet.py against SQLite FTS5's own snippet(): same window, same brackets, on varied texts."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator

import pytest

from store.postgres.pattern import compile_pg
from store.query.pattern import compile_pattern
from store.query.snippet import snippet

_WORDS = ["invoice", "overdue", "PED-89415-X", "café", "the", "a", "a", "Payment", "failed", "x", "89415",
          "ped", "refund", "parse_invoice_v2", "ACME", "Über", "uber", "b c d e f g h i j k l m n o p q r"]
_SEPARATORS = [" ", " ", " ", ". ", ": ", ", ", "-", "\n", ".\n", " (", ") ", "/", "  ", ":", "."]
PATTERNS = ["invoice", "PED-89415-X", '"PED-89415-X"', "ped-89415-x", "invoice overdue", "invoice OR refund",
            '"payment failed"', "cafe", "inv%", "the inv%", "89415", "the", "invoice NOT draft", "uber",
            "parse_invoice_v2", '"the invoice"', "overdue OR x OR the", "a a", "x NOT (the a)",
            '"a b c d e f g h i j k l m n o p q r"', '"ped 89415" OR "89415 x"']


def _texts(count: int) -> Iterator[str]:
    """Seeded texts of 3 to 120 words: ids, accents, repeats, sentence ends and odd spacing."""
    rng = random.Random(24)
    for _ in range(count):
        words = rng.choice([3, 10, 20, 40, 120])
        text = "".join(rng.choice(_WORDS) + rng.choice(_SEPARATORS) for _ in range(words))
        yield (" " + text) if rng.random() < 0.3 else text


@pytest.fixture(scope="module")
def fts5() -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='unicode61 remove_diacritics 2')")
    yield db
    db.close()


def _fts5_snippet(db: sqlite3.Connection, text: str, pattern: str) -> str | None:
    """What the SQLite store shows for this text and pattern (None: no match)."""
    db.execute("DELETE FROM t")
    db.execute("INSERT INTO t(rowid, body) VALUES (1, ?)", (text,))
    row = db.execute("SELECT snippet(t, 0, '[', ']', '…', 16) FROM t WHERE t MATCH ?",
                     (compile_pattern(pattern)[1],)).fetchone()
    return None if row is None else str(row[0])


@pytest.mark.parametrize("pattern", PATTERNS)
def test_snippets_are_fts5s(fts5: sqlite3.Connection, pattern: str) -> None:
    phrases = compile_pg(pattern).phrases
    compared = 0
    for text in _texts(150):
        expected = _fts5_snippet(fts5, text, pattern)
        if expected is not None:
            assert snippet(text, phrases, 16) == expected, text
            compared += 1
    assert compared >= 10


def test_a_text_without_the_match_shows_its_first_words() -> None:
    phrases = compile_pg("absent").phrases
    words = [f"w{n}" for n in range(20)]
    assert snippet(" ".join(words), phrases, 16) == " ".join(words[:16]) + "…"
    assert snippet("short text.", phrases, 16) == "short text."
