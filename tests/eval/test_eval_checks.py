"""The checks catch each defect they exist for, on constructed examples."""

from __future__ import annotations

import json
from typing import Any

from compaction.tokens import TokenCounter
from compaction.types import Message
from replay.checks import (
    CachedCounter,
    check_request,
    extends,
    pairing_violations,
    synthetic_messages,
)
from replay.facts import check_facts, invented_facts
from replay.records import Check

COUNTER = TokenCounter.for_model("gpt-4o-mini")
SYSTEM = {"role": "system", "content": "Be precise."}
CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
    {"id": "call_2", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
RESULT_1 = {"role": "tool", "tool_call_id": "call_1", "content": "one"}
RESULT_2 = {"role": "tool", "tool_call_id": "call_2", "content": "two"}
HISTORY = [SYSTEM, {"role": "user", "content": "Order ORD-12345, budget $4,500."},
           {"role": "assistant", "content": "Noted."},
           {"role": "user", "content": "Correction: the budget is now $5,200."},
           {"role": "assistant", "content": "Corrected."}, {"role": "user", "content": "Go on."}]
BUDGET_CHECK = Check("correction", "$5,200", True, ("$4,500",))


def _anchors(*lines: str) -> dict[str, str]:
    return {"role": "system", "content": "<ctxproxy:anchors>\n" + "\n".join(lines) + "\n</ctxproxy:anchors>"}


def test_pairing_detects_orphan_and_unanswered_and_accepts_parallel_rounds() -> None:
    assert pairing_violations([SYSTEM, CALL, RESULT_2, RESULT_1]) == []
    assert pairing_violations([SYSTEM, RESULT_1, {"role": "user", "content": "x"}]) == ["orphan:call_1"]
    assert pairing_violations([CALL, RESULT_1, {"role": "user", "content": "x"}]) == ["unanswered:call_2"]
    assert pairing_violations([CALL, RESULT_1]) == ["unanswered:call_2"]


def test_request_check_flags_over_budget_and_missing_last_user() -> None:
    forwarded = HISTORY[:-1]
    tight = check_request(HISTORY, forwarded, budget=10, counter=COUNTER)
    assert tight.over_budget and not tight.last_user_present and tight.system_present
    roomy = check_request(HISTORY, HISTORY, budget=10_000, counter=CachedCounter(COUNTER))
    assert not roomy.over_budget and roomy.last_user_present
    assert roomy.tokens_forwarded == COUNTER.count_messages(HISTORY)


def test_invented_fact_in_a_ctxproxy_message_is_reported() -> None:
    summary = {"role": "system", "content": "<ctxproxy:summary id=\"sum_0123456789ab\">Order ORD-12345; "
               "refund $9,999.00 approved on 2031-01-01.</ctxproxy:summary>"}
    forwarded = [SYSTEM, summary, *HISTORY[3:]]
    assert synthetic_messages(forwarded, HISTORY) == [summary]
    assert invented_facts(forwarded, HISTORY) == ["$9,999.00", "2031-01-01"]
    assert invented_facts(HISTORY, HISTORY) == []


def test_a_value_quoted_from_decoded_tool_arguments_is_not_invented() -> None:
    command = 'curl -s "https://docs.example.org/?q=setup&pkg=[otel-0.3.0]" | jq .hits'
    arguments = json.dumps({"command": command})
    call: dict[str, Any] = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": arguments}}]}
    history: list[Message] = [SYSTEM, {"role": "user", "content": "Find the docs."}, call,
               {"role": "tool", "tool_call_id": "c1", "content": "[]"}]
    summary: dict[str, Any] = {"role": "system", "content": f"- ran {command} (no hits)"}
    assert invented_facts([SYSTEM, summary, *history[1:]], history) == []


def test_stale_corrected_value_in_the_anchor_block_is_flagged() -> None:
    stale = [SYSTEM, _anchors("- [amount] budget: $4,500"), *HISTORY[3:]]
    (result,) = check_facts(stale, HISTORY, [BUDGET_CHECK])
    assert result.present and result.stale_as_current == ("$4,500",) and not result.current


def test_superseded_value_shown_as_such_and_raw_history_are_fine() -> None:
    marked = [SYSTEM, _anchors("- [amount] budget: $5,200 (was $4,500, superseded)"), *HISTORY[3:]]
    assert check_facts(marked, HISTORY, [BUDGET_CHECK])[0].current
    assert check_facts(HISTORY, HISTORY, [BUDGET_CHECK])[0].current  # the client's own history


def test_missing_fact_and_prefix_extension() -> None:
    (result,) = check_facts(HISTORY[3:], HISTORY, [Check("order", "ORD-12345")])
    assert not result.present
    assert extends(HISTORY[:3], HISTORY) is True
    assert extends(HISTORY[1:4], HISTORY) is False
    assert extends(None, HISTORY) is None
