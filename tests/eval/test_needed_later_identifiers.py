"""Identifier extraction: shapes from the real sessions, prose that yields nothing, CJK and Portuguese
text glued to identifiers, and generated identifier shapes (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.needed_later.identifiers import IdentifierExtractor, tokenizer_ordinary_word
from replay.needed_later.shell import command_heads, simple_commands
from replay.needed_later.texts import occurs

EXTRACTOR = IdentifierExtractor()


@pytest.mark.parametrize(("text", "expected"), [
    ("Extend `Spotter.Services.TranscriptRenderer` so each line carries metadata",
     {"Spotter.Services.TranscriptRenderer": "dotted", "TranscriptRenderer": "camel"}),
    ("- `lib/spotter/services/transcript_renderer.ex` (modify)",
     {"lib/spotter/services/transcript_renderer.ex": "path", "transcript_renderer.ex": "file",
      "transcript_renderer": "snake"}),
    ("bd update spotter-fum.1 --status in_progress", {"spotter-fum.1": "kebab", "in_progress": "snake"}),
    ("add an xfail with `request.node.add_marker(mark)`", {"request.node.add_marker": "dotted"}),
    ("pytest 6.0.0rc2.dev33+g7f7a36478", {"6.0.0rc2.dev33": "version"}),
    ("testing/test_skipping.py::TestXFail::test_dynamic_xfail",
     {"testing/test_skipping.py::TestXFail::test_dynamic_xfail": "test_id", "TestXFail": "camel"}),
    ("E       AssertionError: assert 0", {"AssertionError": "error"}),
    ("==== 1 passed in 0.02s ====", {"1 passed": "quantity", "0.02s": "quantity"}),
    ("commit 53a088d2 on 2026-02-11", {"53a088d2": "hash", "2026-02-11": "date"}),
    ("Elixir function render_message_enriched/2", {"render_message_enriched/2": "symbol"}),
    ("closing LOT-40913-c (not LOT-40913-b)", {"LOT-40913-c": "kebab", "LOT-40913-b": "kebab"}),
    ("release 8.28.2-rc.5 is out, then 1.9.3.post2", {"8.28.2-rc.5": "version", "1.9.3.post2": "version"}),
    ("src/_pytest/skipping.py:261: in pytest_runtest_makereport",
     {"src/_pytest/skipping.py": "path", "261": "number", "pytest_runtest_makereport": "snake"}),
])
def test_extracts_identifiers_of_real_shapes(text: str, expected: dict[str, str]) -> None:
    found = EXTRACTOR.extract(text)
    for ident, kind in expected.items():
        assert found.get(ident) == kind, (ident, found)


@pytest.mark.parametrize("text", [
    "Let me claim this task and start exploring the codebase.",
    "This covers input/output and/or the read-only, well-known case.",
    "</div></span> the value is 3.5 and 42",
    "Vou ler o arquivo para entender como o lote é fechado, e depois conciliação.",
    "夜间结算任务又失败了。请找出原因，补充测试并修复。",
    "夜間の精算ジョブがまた失敗しています。",
])
def test_prose_in_any_language_yields_nothing(text: str) -> None:
    assert EXTRACTOR.extract(text) == {}


@pytest.mark.parametrize("text", [
    "接下来检查src/ledger/rate_table_v2.py。", "在代码里搜索LOT-40913-c。",
    "「src/ledger/rate_table_v2.py」を読みます", "Conferindo src/ledger/rate_table_v2.py, então LOT-40913-c.",
])
def test_cjk_or_portuguese_glued_to_an_identifier_does_not_change_it(text: str) -> None:
    found = EXTRACTOR.extract(text)
    assert "src/ledger/rate_table_v2.py" in found or "LOT-40913-c" in found, found
    assert all(ident.isascii() for ident in found)


def test_quoted_keys_count_only_when_not_ordinary_words() -> None:
    found = EXTRACTOR.extract("""KeyError: 'ledger_region' then "runxfail" but not "status" """)
    assert found.get("ledger_region") == "snake" and found.get("runxfail") == "quoted"
    assert "status" not in found and found.get("KeyError") == "error"


def test_comma_numbers_are_one_identifier() -> None:
    found = EXTRACTOR.extract("tokens_o200k: 93,775 total")
    assert found.get("93,775") == "number" and "775" not in found


def test_command_heads_skip_heredocs_and_quoted_scripts() -> None:
    script = ("cd /testbed && cat <<'EOF' > reproduce_issue.py\nimport pytest\nEOF\n"
              "sed -i 's/change the/x/' a.py; mix test test/a_test.exs | grep -v foo\n"
              "FOO=1 bd show spotter-fum")
    assert command_heads([script]) == ["mix test", "bd show"]
    assert ["sed", "-i", "s/change the/x/", "a.py"] in simple_commands(script)


def test_ordinary_word_predicate_is_injectable_and_tokenizer_based() -> None:
    extractor = IdentifierExtractor(ordinary_word=lambda w: w in {"spotter", "fum"} or len(w) <= 2)
    assert extractor.extract("see spotter-fum") == {}
    assert extractor.extract("see spotter-xyz") == {"spotter-xyz": "kebab"}
    ordinary = tokenizer_ordinary_word(lambda text: 1 if text.strip() in {"request", "the"} else 2)
    assert ordinary("request") and ordinary("The") and ordinary("ab")
    assert not ordinary("xfail") and not ordinary("add_marker")


_PART = st.text("abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=6)
_SHAPES = st.one_of(
    st.builds(lambda a, n, s: f"{a.upper()}-{n}-{s}", _PART, st.integers(1000, 99999),
              st.sampled_from("bcdef")),
    st.builds(lambda a, b: f"src/{a}/{b}_v2.py", _PART, _PART),
    st.builds(lambda a, b: f"{a}_{b}", _PART, _PART),
    st.builds(lambda a, b, c: f"{a}.{b}.{c}_x", _PART, _PART, _PART),
    # A hash has digits and letters (the extractor's rule; an all-letter "fffffffffffa" is not one).
    st.builds(lambda h: f"{h:012x}", st.integers(16**11, 16**12 - 1))
    .filter(lambda h: not h.isdigit() and any(c.isdigit() for c in h)),
)


@settings(max_examples=80, deadline=None)
@given(ident=_SHAPES, before=st.sampled_from(["", "see ", "接下来检查", "Conferindo ", "("]),
       after=st.sampled_from(["", ".", "。", " now", ")", "を読みます"]))
def test_generated_identifiers_are_found_whole_wherever_they_sit(ident: str, before: str, after: str) -> None:
    text = f"{before}{ident}{after}"
    assert ident in EXTRACTOR.extract(text)
    assert occurs(ident, text)
    assert not occurs(ident, f"{ident}x") and not occurs(ident, f"x{ident}")
