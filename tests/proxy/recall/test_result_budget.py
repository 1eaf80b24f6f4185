"""Recall tool results are cut to what the prepared request left free, so a re-ask still fits.

Unit tests of compaction.recall.result_budget.ResultBudget, then the real app: a message far bigger than
the free budget is compacted away, the model expands it, and the re-asked request stays in budget.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from compaction.recall.result_budget import MIN_RESULT_TOKENS, ResultBudget
from compaction.tokens import TokenCounter
from config.settings import RecallSettings
from proxy import appkeys
from tests.conftest import TEST_API_KEY, ProxyFactory, settled
from tests.fakes.upstream import FakeUpstream, Reply, tool_call
from tests.proxy.recall.test_end_to_end import EXPAND, SEARCH, client, long_history, settings
from tests.sdk_params import sdk_messages

JSON = dict[str, Any]
COUNTER = TokenCounter.for_model("gpt-4o-mini")
MARKER = "ZEBRAQUOKKA"  # a unique word in the huge message, for the model's search
HUGE = " ".join(f"line {i}: the {MARKER} inventory export lists pallet {i} with its weight and bin."
                for i in range(400))


def budget(remaining: int) -> ResultBudget:
    return ResultBudget(COUNTER, RecallSettings(), remaining)


def tool_message(content: str) -> JSON:
    return {"role": "tool", "tool_call_id": "call_1", "content": content}


def test_small_results_are_untouched() -> None:
    message = tool_message('{"items": []}')
    assert budget(10_000).bound(EXPAND, message, 500) is message


@pytest.mark.parametrize(("name", "advice"), [(EXPAND, "fewer ids"), (SEARCH, "narrower pattern")])
def test_a_big_result_is_cut_to_its_allowance_with_a_marker(name: str, advice: str) -> None:
    message = tool_message(json.dumps({"items": [{"id": "7", "text": HUGE}]}))
    cut = budget(10_000).bound(name, message, 600)
    assert COUNTER.count_message(cut) <= 600 < COUNTER.count_message(message)
    assert cut["content"].startswith('{"items": [{"id": "7", "text": "line 0')
    assert advice in cut["content"] and "result cut to fit" in cut["content"]
    assert cut["tool_call_id"] == "call_1" and cut["role"] == "tool"


def test_shares_split_the_rest_and_keep_a_floor_while_older_turns_can_make_room() -> None:
    b = budget(3_000)
    assert b.share(1) == 3_000 and b.share(3) == 1_000
    b.spend([tool_message(HUGE)])
    assert b.remaining < 0 and b.share(2) == 0  # nothing left and nothing to give way
    roomy = ResultBudget(COUNTER, RecallSettings(), 0, budget=8_000, evictable=5_000)
    assert roomy.share(1) == 2_000 and roomy.share(2) == 1_000  # a quarter of the budget
    assert ResultBudget(COUNTER, RecallSettings(), 0, budget=8_000, evictable=300).share(1) == 300
    assert MIN_RESULT_TOKENS <= 2_000


def test_a_reask_over_budget_leaves_out_the_oldest_raw_turns_behind_one_pointer() -> None:
    forwarded = [{"role": "system", "content": "rules"}, {"role": "user", "content": "task " * 50},
                 *[{"role": "assistant", "content": f"step {i} " * 40} for i in range(8)]]  # agent loop
    rounds = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": EXPAND, "arguments": "{}"}}]},
        tool_message("x " * 300) | {"tool_call_id": "c1"}]
    limit = COUNTER.count_messages(forwarded) + 100
    b = ResultBudget(COUNTER, RecallSettings(), 100, budget=limit, forwarded=len(forwarded))
    assert b.fit(forwarded, []) == forwarded  # fits: unchanged
    out = b.fit([*forwarded, *rounds], [])
    assert COUNTER.count_messages(out) <= limit
    assert out[:2] == forwarded[:2] and out[-2:] == rounds and forwarded[-1] in out
    assert sum("to make room for recall results" in str(m["content"]) for m in out) == 1
    assert out[2]["role"] == "system" and out[3] in forwarded[3:]  # the oldest turns gave way


def test_a_first_round_is_the_prepared_request_and_is_not_counted_again() -> None:
    """Every turn that offers the recall tools has a first round: the prepared request, which the
    engine fitted and counted. It is forwarded as it is, without a token counted on the HTTP loop;
    what older turns could give way is counted only when a round calls a recall tool."""
    from compaction.types import Occupancy, PreparedRequest

    calls: list[str] = []

    def counted(text: str) -> int:
        calls.append(text)
        return len(text.split())

    counter = TokenCounter("o200k_base", counted)
    forwarded = tuple({"role": "user" if i % 2 else "assistant", "content": f"turn {i} " * 30}
                      for i in range(12))
    prepared = PreparedRequest("conv_x", forwarded, (), 900, 800, 1_000, True, (), Occupancy(),
                               False, False, None)
    b = ResultBudget.for_prepared(prepared, counter, RecallSettings())
    assert b.fit(list(forwarded), []) == list(forwarded) and calls == []
    assert b.share(1) > 200 and calls  # a round's share counts what could give way
    calls.clear()
    over = replace(prepared, tokens_forwarded=1_200)  # not fitted (an oversized last message):
    ResultBudget.for_prepared(over, counter, RecallSettings()).fit(list(forwarded), [])
    assert calls  # the re-ask is counted, as any later round's


def expanding_model(body: JSON) -> Reply:
    """Searches the huge message, expands it, then answers."""
    last = body["messages"][-1]
    if last["role"] != "tool":
        return Reply(text=None, tool_calls=[tool_call("call_s", SEARCH, {"pattern": MARKER})])
    if last["tool_call_id"] == "call_s":
        hit = next(h for h in json.loads(last["content"])["hits"] if h["kind"] == "message")
        return Reply(text=None, tool_calls=[tool_call("call_e", EXPAND, {"ids": [hit["id"]]})])
    return Reply(text="done")


def request_tokens(body: JSON) -> int:
    return COUNTER.count_messages(body["messages"]) + COUNTER.count_tools(body.get("tools") or [])


async def test_expanding_a_huge_message_keeps_the_reask_within_budget(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream, tmp_path: Path) -> None:
    fake_upstream.responder = expanding_model
    server = await make_proxy(settings(fake_upstream.url, tmp_path))
    history = long_history()
    history[4:4] = [{"role": "user", "content": "Here is the export."},
                    {"role": "assistant", "content": HUGE}]
    reply = await client(server).chat.completions.create(model="gpt-4o-mini", messages=sdk_messages(history))
    assert reply.choices[0].message.content == "done"

    await settled(server)
    store = server.app[appkeys.STORE]
    tenant = store.for_tenant(store.tenant_id_for_key(TEST_API_KEY))
    [conversation] = tenant.list_conversations()
    record = tenant.forwarded(conversation.id)[-1]
    free = record.budget - record.tokens_forwarded
    assert COUNTER.count_text(HUGE) > free  # the expanded message cannot fit as it is
    bodies = [r.body for r in fake_upstream.requests]
    assert len(bodies) == 3
    expanded = bodies[2]["messages"][-1]
    assert expanded["tool_call_id"] == "call_e" and MARKER in expanded["content"]
    assert "result cut to fit" in expanded["content"]
    assert all(request_tokens(b) <= record.budget for b in bodies)
