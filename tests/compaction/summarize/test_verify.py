"""The extractive verifier rejects invented facts and accepts faithful summaries."""

from __future__ import annotations

import pytest

from compaction.summarize.verify import fact_tokens, normalise_number, verify_summary

SOURCES = ("[#3 user]\nMy order ORD-88231 costs $1,250.00; ship to /home/ana/app.py by 2026-03-15. "
           "Contact ana@x.com. I talked to Bruno Souza about postgres at https://ex.com/a.")
FAITHFUL = ("## Intent\nThe user wants order ORD-88231 ($1250) shipped by 2026-03-15 (#3).\n"
            "## Files and artifacts\n- /home/ana/app.py\n## Decisions\n1. Use Postgres, discussed with "
            "Bruno Souza.\n## Next steps\n- Mail ana@x.com, see https://ex.com/a\n"
            "Expand for details about: order, postgres")


@pytest.mark.parametrize(("number", "normal"), [("1,250.00", "1250"), ("1.200,00", "1200"), ("4.5", "4.5"),
                                                ("4,500", "4500"), ("0.50", "0.5"), ("1250", "1250")])
def test_normalise_number(number: str, normal: str) -> None:
    assert normalise_number(number) == normal


def test_fact_tokens() -> None:
    facts = fact_tokens(SOURCES)
    assert {"ord-88231", "1250", "/home/ana/app.py", "2026-03-15", "ana@x.com", "bruno", "souza"} <= facts
    assert "my" not in facts and "contact" not in facts  # sentence-start words are not names


def test_faithful_summary_passes() -> None:
    assert verify_summary(FAITHFUL, SOURCES, "").ok


@pytest.mark.parametrize(("invention", "fact"), [
    ("Order ORD-99999 is new.", "ord-99999"), ("It was approved by Zelda Quorn.", "zelda"),
    ("The refund is $7,777.", "7777"), ("Due on 2026-12-24.", "2026-12-24"),
    ("Edit /etc/secret/x.conf too.", "/etc/secret/x.conf"), ("Mail bob@evil.com.", "bob@evil.com"),
])
def test_invented_fact_rejected(invention: str, fact: str) -> None:
    result = verify_summary(f"{FAITHFUL}\n- {invention}", SOURCES, "")
    assert not result.ok and fact in result.rejected_facts


def test_anchors_count_as_sources_and_header_is_ignored() -> None:
    summary = '<ctxproxy:summary id="sum_abc123def456" depth="0" messages="12-31">\nBudget is $5,200.'
    assert not verify_summary(summary, SOURCES, "").ok
    assert verify_summary(summary, SOURCES, "- [amount] budget: $5,200 (from message 7)").ok


@pytest.mark.parametrize(("invention", "fact"), [
    ("- Bob approved the refund.", "bob"),
    ("Next steps: Zoe calls the bank.", "zoe"),
    ("Ed will pay the invoice.", "ed"),
    ("The order went to McDonald for review.", "mcdonald"),
    ("Paid in EUR after NASA signed off.", "eur"),
    ("Paid in EUR after NASA signed off.", "nasa"),
    ("1. Sam owns the migration.", "sam"),
    ("Decision: Kim approved it.", "kim"),
])
def test_invented_name_at_line_or_sentence_start_rejected(invention: str, fact: str) -> None:
    result = verify_summary(f"{FAITHFUL}\n{invention}", SOURCES, "")
    assert not result.ok and fact in result.rejected_facts


@pytest.mark.parametrize("line", [
    "- Bruno approved the order.",  # a source name at a line start
    "Contact ana@x.com again.",  # a sentence-start word whose lowercase form is in the sources
    "Next steps: Use Postgres.",  # common words after a colon
    "- Shipped by 2026-03-15; Souza agreed.",
])
def test_sentence_start_words_from_sources_or_common_pass(line: str) -> None:
    result = verify_summary(f"{FAITHFUL}\n{line}", SOURCES, "")
    assert result.ok, result.rejected_facts


@pytest.mark.parametrize(("sources", "summary"), [
    ("Ed pays the invoice on Monday.", "- Ed pays the invoice."),
    ("Convert the total to eur before NASA reviews it.", "- Convert to EUR before NASA reviews."),
    ("Lunch at McDonald with GitHub people.", "- Lunch at McDonald (GitHub)."),
])
def test_short_names_acronyms_and_camelcase_found_in_sources_pass(sources: str, summary: str) -> None:
    assert verify_summary(summary, sources, "").ok
