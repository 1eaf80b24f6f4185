"""The needed-later measure on a toy session: what counts as needed, scores, placeholders, attribution,
and the fallback level of compaction steps."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from replay.fallback import level_counts, outcome_counts, pass_level, shares
from replay.needed_later.attribution import explain_loss, trace_origins
from replay.needed_later.identifiers import IdentifierExtractor
from replay.needed_later.needed import NeededIndex
from replay.needed_later.placeholders import find_placeholders, placeholder_tokens
from replay.needed_later.scoring import RequestScore, paired, retention, score_request
from replay.needed_later.texts import TextIndex, occurs, readable_text
from replay.run import request_points
from store.models import CompactionEvent

EXTRACTOR = IdentifierExtractor()


def _call(cid: str, command: str) -> dict[str, Any]:
    return {"id": cid, "type": "function",
            "function": {"name": "Bash", "arguments": json.dumps({"command": command})}}


SESSION: list[dict[str, Any]] = [
    {"role": "system", "content": "You work in /repo; config lives in settings_local.py"},
    {"role": "user", "content": "Fix the bug in lib/app/parser.ex (see issue APP-1234)."},
    {"role": "assistant", "content": "", "tool_calls": [_call("c1", "cat lib/app/parser.ex")]},
    {"role": "tool", "tool_call_id": "c1", "content": "def parse_line(x), do: Foo.Bar.baz(x)"},
    {"role": "assistant", "content": "parse_line calls Foo.Bar.baz; settings_local.py is unrelated.",
     "tool_calls": [_call("c2", "mix test test/app/parser_test.exs")]},
    {"role": "tool", "tool_call_id": "c2", "content": "1 failure in parser_test.exs: Foo.Bar.baz/1"},
    {"role": "assistant", "content": "Editing lib/app/parser.ex: parse_line now guards nil."},
]
INDEX = NeededIndex(SESSION, (), EXTRACTOR, max_lookahead=3)


def test_occurs_is_word_bounded_and_reads_decoded_arguments() -> None:
    assert occurs("parse_line", "def parse_line(x)") and not occurs("parse_line", "def parse_lines(x)")
    assert occurs("parse_line", "parse_lines; parse_line") and not occurs("", "anything")
    index = TextIndex("see lib/app/parser.ex:12 and parse_lines")
    assert index.has("lib/app/parser.ex") and not index.has("parse_line") and not index.has("lib/app/parse")
    assert occurs("lib/app/parser.ex", "/repo/lib/app/parser.ex:12")
    call = {"role": "assistant", "content": "", "tool_calls": [_call("c9", "cd /repo\nls src_dir")]}
    assert occurs("src_dir", readable_text(call))


def test_needed_means_carried_from_a_non_system_message() -> None:
    assert request_points(SESSION) == [2, 4, 6]
    assert {i.ident for i in INDEX.needs(2).select(1)} == {"lib/app/parser.ex", "parser.ex"}
    second = {i.ident for i in INDEX.needs(4).select(1)}
    assert {"parse_line", "Foo.Bar.baz"} <= second
    assert "settings_local.py" not in second  # only in the system prompt: every strategy keeps it
    assert "mix test" not in second  # never seen before


def test_lookahead_skips_identifiers_resupplied_after_the_request() -> None:
    later = {i.ident: i.lookahead for i in INDEX.needs(2).select(3)}
    assert later["lib/app/parser.ex"] == 1
    assert "parse_line" not in later  # first seen in the tool result after request 2


def test_last_user_message_identifiers_are_flagged() -> None:
    flags = {i.ident: i.in_last_user for i in INDEX.needs(6).items}
    assert flags["lib/app/parser.ex"] is True and flags["parse_line"] is False


def _score(point: int, text: str, history: int = 900) -> RequestScore:
    return score_request(INDEX.needs(point), TextIndex(text), history_tokens=history, budget=500,
                         forwarded_tokens=400)


def test_scores_count_kept_identifiers_per_lookahead_over_window_only() -> None:
    full = "\n".join(readable_text(m) for m in SESSION[:4])
    kept_all, kept_none = _score(4, full), _score(4, "nothing here")
    assert kept_all.kept == kept_all.needed and kept_all.missing == frozenset()
    assert kept_none.kept == (0, 0) and kept_none.missing
    assert retention([kept_all, kept_none], 1).mean == 0.5
    assert retention([_score(4, "nothing", history=100)], 1).requests == 0  # fits: not over-window
    assert kept_all.unused_share == 0.2
    diff = paired([kept_all], [kept_none], 1)
    assert diff.mean_diff == 1.0 and diff.a_better == 1 and diff.ties == 0


def test_placeholders_are_markers_with_their_husks() -> None:
    husky = ("[#12 tool]\nTicket\n[... truncated; expand 12 ...]\nso.\n\n"
             "[#13 user]\nA whole sentence that says a lot.")
    found = find_placeholders(husky)
    assert found.husks == ("[#12 tool]\nTicket\n[... truncated; expand 12 ...]\nso.",)
    assert found.markers == ()
    marker = "[ctxproxy: 900 tokens truncated from message 57; call context_expand]"
    cut = f"def long_function_name(x):\n{marker}\nreturn value_of_everything"
    assert find_placeholders(cut).markers == (marker,)
    assert find_placeholders("plain [not a marker] text").markers == ()
    pointer = "[ctxproxy: 14 earlier messages or summaries omitted here (ids 3-16); call context_expand]"
    with_content = f"{pointer}\n\nA long paragraph that carries real content."
    assert find_placeholders(with_content).markers == (pointer,)
    tokens = placeholder_tokens([{"role": "system", "content": husky}], lambda text: len(text.split()))
    assert tokens == 2 + 1 + 5 + 1


def test_attribution_names_the_mechanism() -> None:
    cut = {**SESSION[3], "content": "def parse_line\n[ctxproxy: 40 tokens truncated from message 4; x]\n(x)"}
    tag = '<ctxproxy:summary id="sum_aaaaaaaaaaaa" depth="0" messages="1-2">'
    summary = {"role": "system", "content": f"{tag}\nS"}
    origins = trace_origins(SESSION, [SESSION[0], summary, cut, SESSION[4]])
    assert [o.kind for o in origins] == ["system", "summary", "raw", "raw"]
    assert origins[2].seq == 3 and origins[2].cut and origins[3].seq == 4
    levels = {"sum_aaaaaaaaaaaa": "extractive"}
    assert explain_loss("x_y", 3, origins, levels, [(1, 2)]) == "cut"
    assert explain_loss("task_id", 1, origins, levels, [(1, 2)]) == "summarised_without_it"
    assert explain_loss("task_id", 1, origins, {"sum_aaaaaaaaaaaa": "truncation"}, [(1, 2)]) == \
        "summarised_at_truncation_level"
    dropped = trace_origins(SESSION, [SESSION[0], SESSION[4]])
    assert explain_loss("x_y", 3, dropped, {}, []) == "dropped_raw"
    assert explain_loss("x_y", 3, dropped, {}, [(2, 3)]) == "dropped_summary"


def _event(tier: str, level: str, outcome: str = "committed") -> CompactionEvent:
    return CompactionEvent("c", "hard_budget", tier, level, outcome, "m")  # type: ignore[arg-type]


def test_fallback_levels_of_committed_steps() -> None:
    events = [_event("leaf", "normal"), _event("leaf", "aggressive"), _event("leaf", "extractive"),
              _event("condensed", "truncation"), _event("truncation", "truncation"),
              _event("leaf", "normal", "failed"), _event("leaf", "elision"), _event("leaf", "mystery")]
    assert [pass_level(e) for e in events[:5]] == [
        "llm_normal", "llm_aggressive", "extractive", "truncation", "forced_truncation"]
    counts = level_counts(events)
    assert counts == {"llm_normal": 1, "llm_aggressive": 1, "extractive": 1, "truncation": 1, "elision": 1,
                      "forced_truncation": 1, "leaf/mystery": 1}
    assert shares(counts)["llm_normal"] == 1 / 7 and shares({}) == {}
    after = replace(_event("leaf", "extractive"), rejected_facts=("2031-02-28",))
    assert outcome_counts([*events[:2], events[5], after]) == {"committed": 2, "failed": 1,
                                                               "committed_after_rejection": 1}
