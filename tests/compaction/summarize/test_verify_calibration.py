"""The verifier calibrated on real text: ordinary words are never facts, reformatted facts pass,
changed or invented facts are caught, and the calibration corpus keeps both rates in bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.verifier_eval import build_corpus
from compaction.summarize.lexicon import word_class
from compaction.summarize.verify import CalibrationCase, calibration_rates, verify_summary

SOURCES = ("[#12 assistant]\nThe order ORD-4471-B (1200 units, total $3,450.50) is due 2027-03-15. "
           "I edited /repo/src/billing/invoice.py and ran `pytest -x tests/test_invoice.py` with "
           "pytest 6.0.0rc2.dev33+g7f7a36478. Ana Ferreira approved.\n"
           "[#13 tool]\nKeyError: 'user_id' in handler.process_event at invoice.py:245")


@pytest.mark.parametrize("line", [
    "Copy the text of the invoice before editing.",
    "- Investigated the failure; Reproduced it; Refactored the handler.",
    "Text: Parametrised the tests. Rerun them afterwards.",
    "Meanwhile the outcome was summarised. However the handler still fails. Summarised.",
])
def test_ordinary_words_at_sentence_starts_are_not_facts(line: str) -> None:
    assert verify_summary(line, SOURCES).ok, verify_summary(line, SOURCES).rejected_facts


@pytest.mark.parametrize("line", [
    "Order ord-4471-b: 1,200 units for $3450.5, due March 15, 2027.",  # case, separators, date form
    "Edited src/billing/invoice.py and invoice.py; see src/billing for the rest.",  # path suffixes
    "Installed pytest 6.0.0rc2 and ran `pytest -x tests/test_invoice.py`.",  # version prefix
    "The KeyError on 'user_id' comes from `handler.process_event` (invoice.py:245); ana ferreira agreed.",
    "Expand for details about: #12, #13",
])
def test_reworded_facts_pass(line: str) -> None:
    result = verify_summary(line, SOURCES)
    assert result.ok, result.rejected_facts


@pytest.mark.parametrize(("line", "fact"), [
    ("The order is ORD-4471.", "ord-4471"),  # a prefix of a longer id is another id
    ("The order is ORD-4471-C.", "ord-4471-c"),  # a changed suffix
    ("The order is ORD-4472-B.", "ord-4472-b"),  # a changed digit
    ("Total €3,450.50.", "3450.5"),  # the same number in another currency
    ("Due 2027-03-16.", "2027-03-16"),
    ("Due April 15, 2027.", "2027-04-15"),
    ("Edited src/billing/invoices.py.", "src/billing/invoices.py"),
    ("See https://ci.example.com/run/7.", "https://ci.example.com/run/7"),
    ("Zoe Marchetti approved.", "zoe"),
    ("Approved by Marchetti.", "marchetti"),
    ("It fails at invoice.py:246.", "246"),
    ("Calls handler.process_events.", "handler.process_events"),
    ("Commit 9f3e2ab fixed it.", "9f3e2ab"),
    ("Ticket #14 tracks it.", "#14"),
])
def test_changed_or_invented_facts_are_caught(line: str, fact: str) -> None:
    result = verify_summary(line, SOURCES)
    assert not result.ok and fact in result.rejected_facts, result.rejected_facts


def test_portuguese_word_forms_sharing_a_stem_with_the_sources_pass() -> None:
    sources = "[#3 user]\nO time decidiu corrigir o arquivo src/app.py antes da entrega."
    assert verify_summary("Decidimos corrigir src/app.py. Corrigido antes da entrega.", sources).ok


def test_lexicon_separates_words_from_names() -> None:
    assert [word_class(w) for w in ("copy", "text", "zoe", "kim")] == ["ordinary", "ordinary", "name",
                                                                        "name"]


def test_calibration_rates_count_each_verdict() -> None:
    cases = [CalibrationCase("faithful/x", "Order ORD-4471-B.", SOURCES),
             CalibrationCase("faithful/x", "Order ORD-9.", SOURCES),
             CalibrationCase("invented/y", "Order ORD-4471-C.", SOURCES, invented="ORD-4471-C"),
             CalibrationCase("invented/y", "Order ord-4471-b.", SOURCES, invented="ord-4471-b")]
    report = calibration_rates(cases)
    assert (report.faithful, report.false_rejections, report.invented, report.caught) == (2, 1, 2, 1)
    assert report.false_rejection_rate == 0.5 and report.catch_rate == 0.5
    assert report.by_category == {"faithful/x": (2, 1), "invented/y": (2, 1)}


@pytest.mark.slow
def test_generated_corpus_rates_stay_in_bounds(tmp_path: Path) -> None:
    """The generator part of bench/verifier_eval.py's corpus (the real sessions are not needed)."""
    report = calibration_rates(build_corpus(seed=3, sessions_dir=tmp_path))
    assert report.faithful >= 12 and report.invented >= 60
    assert report.false_rejection_rate <= 0.05, report.misjudged
    assert report.catch_rate >= 0.95, report.misjudged
