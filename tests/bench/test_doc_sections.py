"""The eval and bench writers each replace only their own section of docs/results.md."""

from __future__ import annotations

from pathlib import Path

from bench.doc_sections import replace_section


def test_sections_are_appended_then_replaced_in_place(tmp_path: Path) -> None:
    doc = tmp_path / "results.md"
    replace_section(doc, "<!-- a -->", "<!-- /a -->", "<!-- a -->\nA1\n<!-- /a -->")
    replace_section(doc, "<!-- b -->", "<!-- /b -->", "<!-- b -->\nB1\n<!-- /b -->")
    replace_section(doc, "<!-- a -->", "<!-- /a -->", "<!-- a -->\nA2\n<!-- /a -->")
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("# ctxproxy results\n")
    assert "A2" in text and "A1" not in text and "B1" in text
    assert text.index("A2") < text.index("B1")
