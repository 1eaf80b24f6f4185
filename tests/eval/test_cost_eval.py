"""The cost measure: shared prefixes and billed input by hand, compact-once's shape, handoff facts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.cost_eval import (
    BEGIN,
    END,
    STRATEGIES,
    CostResult,
    FactTotals,
    main,
    measure,
    message_key,
    section,
    write,
)
from bench.eval_sets import quarter_window
from bench.results_doc import BEGIN as EVAL_BEGIN
from bench.results_doc import END as EVAL_END
from compaction import ExtractiveSummarizer, TokenCounter
from replay.checks import CachedCounter, pairing_violations
from replay.compact_once import SUMMARY_INTRO, CompactOnce
from replay.cost import CostTotals, ForwardedRequest, RequestCost, request_costs
from replay.needed_later.evaluate import default_extractor
from replay.needed_later.handoff import HandoffScore, handoff_points, score_handoff
from replay.needed_later.needed import NeededIndex
from replay.needed_later.texts import readable_text
from replay.records import RecordedConversation
from replay.run import ReplayOptions

TOKENS = {"sys": 1000, "sys2": 1000, "task": 300, "a": 400, "summary": 150, "b": 50}


def request(keys: list[str], tools: int = 100) -> ForwardedRequest:
    counts = tuple(TOKENS[k] for k in keys)
    return ForwardedRequest(counts, tuple(keys), tools, f"tools{tools}", tools + sum(counts) + 3)


def test_prefixes_steps_and_billed_input_by_hand() -> None:
    sequence = [request(["sys", "task"]),  # first request: nothing cached
                request(["sys", "task", "a"]),  # appends: tools + sys + task shared
                request(["sys", "summary", "b"]),  # a compaction: only tools + sys shared
                request(["sys", "summary", "b"], tools=120),  # other tools: nothing shared
                request(["sys2", "summary", "b"], tools=120)]  # the system prompt changed: tools only
    costs = request_costs(sequence)
    assert costs == [RequestCost(1403, 0, False), RequestCost(1803, 1400, False),
                     RequestCost(1303, 1100, True), RequestCost(1323, 0, True), RequestCost(1323, 120, True)]
    assert [c.anthropic for c in costs] == pytest.approx(
        [1.25 * 1403, 0.1 * 1400 + 1.25 * 403, 0.1 * 1100 + 1.25 * 203, 1.25 * 1323, 0.1 * 120 + 1.25 * 1203])
    # OpenAI discounts a prefix of at least 1,024 tokens only
    assert [c.openai for c in costs] == pytest.approx([1403, 140 + 403, 110 + 203, 1323, 1323])
    totals = CostTotals.of(costs, summarizer_tokens=77)
    assert totals.steps == 3 and totals.steps_per_100 == pytest.approx(60.0)
    assert totals.anthropic == pytest.approx(1753.75 + 643.75 + 363.75 + 1653.75 + 1515.75)
    assert totals.openai == pytest.approx(1403 + 543 + 313 + 1323 + 1323)
    assert totals.mean_reuse == pytest.approx((1400 / 1803 + 1100 / 1303 + 120 / 1323) / 5)
    assert totals.summarizer_tokens == 77 and totals.prefix_tokens == 2620
    pooled = CostTotals.pooled([totals, CostTotals.of(costs[:1])])
    assert pooled.requests == 6 and pooled.mean_reuse == pytest.approx(totals.mean_reuse * 5 / 6)


def test_message_identity_is_byte_identity() -> None:
    a = {"role": "system", "content": "rules"}
    assert message_key(a) == message_key({"content": "rules", "role": "system"})
    assert message_key(a) != message_key({"role": "system", "content": "rules "})


SHELL_TOOL = {"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}}}}


def _round(i: int) -> list[dict[str, Any]]:
    call = {"id": f"call_{i}", "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": f"cat src/mod_{i}.py"})}}
    body = "\n".join(f"line {j} of src/mod_{i}.py: value_{i}_{j} = {i * j}" for j in range(40))
    said = f"As value_{i - 2}_3 said, the next module." if i > 1 else ""  # two rounds back
    return [{"role": "assistant", "content": said, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": body}]


HISTORY: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."},
           {"role": "user", "content": "Fix the failing test in src/mod_0.py."},
           *[m for i in range(40) for m in _round(i)]]


def test_compact_once_keeps_system_task_and_one_summary_and_only_appends_between_steps() -> None:
    counter = CachedCounter(TokenCounter.for_model("gpt-4o-mini"))
    budget = 6_000
    once = CompactOnce(budget, counter, counter.counter, ExtractiveSummarizer())
    previous: list[dict[str, Any]] | None = None
    appended = 0
    for k in range(4, len(HISTORY) + 1, 2):  # every request ends with a tool result
        out = once(HISTORY[:k], budget, counter)
        assert out[:2] == HISTORY[:2]
        summaries = [m for m in out if str(m.get("content", "")).startswith(SUMMARY_INTRO)]
        assert len(summaries) == (1 if once.compactions else 0)
        assert out[-1] == HISTORY[k - 1] and pairing_violations(out) == []
        assert counter.count_messages(out) <= budget
        if previous is not None and out[:len(previous)] == previous:
            appended += 1
        previous = out
    assert once.compactions >= 3 and once.summarizer_tokens > 0
    assert appended >= 19 - once.compactions - 1  # only the compacting requests break the prefix


def test_handoff_counts_verbatim_lines_only_and_leaves_out_what_the_client_resends() -> None:
    line = "The loader is src/app/config_loader.py and the key is RETRY_LIMIT."
    reply = "Editing src/app/config_loader.py for RETRY_LIMIT in /srv/checkout/app."
    messages = [{"role": "system", "content": "You are a coding agent."},
                {"role": "user", "content": "Find the config."},
                {"role": "assistant", "content": "Looking."},
                {"role": "user", "content": line},
                {"role": "assistant", "content": "Checking the environment."},
                {"role": "user", "content": "Environment: cwd /srv/checkout/app"},
                {"role": "assistant", "content": reply}]
    index = NeededIndex(messages, (), default_extractor())
    verbatim = score_handoff(index, messages, 6, 70, line, 10_000, lambda m: 10)
    summary_line = "loader: src/app/config_loader.py, key RETRY_LIMIT"
    reworded = score_handoff(index, messages, 6, 70, summary_line, 10_000, lambda m: 10)
    assert verbatim.resent == 1  # the cwd is in the request's new input: every strategy has it
    assert verbatim.needed == reworded.needed == 4  # the path, the file, config_loader, RETRY_LIMIT
    assert verbatim.kept == 4 and reworded.kept == 0
    far = score_handoff(index, messages, 6, 70, line, 25, lambda m: 10)  # 3 messages x 10 tokens > 25
    assert (far.long_range, far.long_range_kept) == (4, 4)
    assert handoff_points([3, 5, 7, 9, 11, 13, 15, 17, 19, 21]) == {17: 70, 19: 80, 21: 90}
    assert readable_text(messages[3]).strip() == line


def test_cost_section_is_generated_between_its_markers(tmp_path: Path) -> None:
    cost = CostTotals.of(request_costs([request(["sys", "task"]), request(["sys", "task", "a"])]), 10)
    results = [CostResult("s1", "ctxproxy", cost, 0, (HandoffScore(70, 5, 4, 3, 2, 1, 0),),
                          every=FactTotals(40, 30, 8, 3)),
               CostResult("s1", "full_history", cost, 1, (HandoffScore(70, 5, 4, 4, 2, 2, 0),),
                          every=FactTotals(40, 40, 8, 8))]
    text = section(results, ["ctxproxy", "full_history"], {"seconds": 1.0, "workers": 1})
    assert text.startswith(BEGIN) and text.endswith(END)
    assert "| ctxproxy | 3/4 | 1/2 | 75.0 % | 3/8 | 0/2 |" in text
    assert "| full_history | 4/4 | 2/2 | 100.0 % | 8/8 | 1/2 |" in text


def test_every_strategy_runs_on_a_small_session_and_writes_its_section(tmp_path: Path) -> None:
    conv = RecordedConversation("small", tuple(HISTORY), (), (SHELL_TOOL,))
    options = ReplayOptions(model="gpt-4o-mini", window=quarter_window(conv, "gpt-4o-mini"))
    results = [measure(conv, s, options) for s in STRATEGIES]
    by = {r.strategy: r for r in results}
    assert {r.cost.requests for r in results} == {40} and all(len(r.handoffs) == 3 for r in results)
    assert by["full_history"].over_budget > 0 and by["full_history"].cost.steps == 0
    assert all(by[s].over_budget == 0 for s in ("ctxproxy", "sliding_window", "compact_once"))
    assert by["compact_once"].cost.steps < by["sliding_window"].cost.steps
    assert by["ctxproxy"].cost.summarizer_tokens > 0 and by["compact_once"].cost.summarizer_tokens > 0
    assert by["sliding_window"].cost.summarizer_tokens == 0
    full = by["full_history"].figures()
    assert full["kept"] == full["needed"] > 0
    # every request scored: the handoffs are three of them; the full history keeps every fact at each
    assert full["every_kept"] == full["every_needed"] > full["needed"]
    assert all(r.figures()["every_needed"] == full["every_needed"] for r in results)
    doc = tmp_path / "results.md"
    doc.write_text(f"# ctxproxy results\n\n{EVAL_BEGIN}\nkept\n{EVAL_END}\n", encoding="utf-8")
    for _ in range(2):
        write(results, STRATEGIES, {"seconds": 1.0, "workers": 1}, tmp_path / "cost.json", doc)
    text = doc.read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and f"{EVAL_BEGIN}\nkept\n{EVAL_END}" in text
    assert "| compact_once |" in text and json.loads((tmp_path / "cost.json").read_text())["results"]


def test_set_changes_ctxproxy_settings_and_rejects_unknown_keys(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--set", "anchor_max_percnt=3", "--docs", ""])
    assert "did you mean 'anchor_max_percent'" in capsys.readouterr().err
