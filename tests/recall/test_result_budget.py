"""Recall tool results are cut to what the prepared request left free, so a re-ask still fits.

Unit tests of compaction.recall_budget.ResultBudget, then the real app: a message far bigger than
the free budget is compacted away, the model expands it, and the re-asked request stays in budget.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compaction.recall_budget import MIN_RESULT_TOKENS, ResultBudget
from compaction.tokens import TokenCounter
from config.settings import RecallSettings
from proxy import appkeys
from tests.conftest import TEST_API_KEY, ProxyFactory
from tests.fakes.upstream import FakeUpstream, Reply, tool_call
from tests.recall.test_end_to_end import EXPAND, SEARCH, client, long_history, settings
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


def test_shares_split_the_rest_and_never_go_below_the_floor() -> None:
    b = budget(3_000)
    assert b.share(1) == 3_000 and b.share(3) == 1_000
    b.spend([tool_message(HUGE)])
    assert b.remaining < 0 and b.share(2) == MIN_RESULT_TOKENS


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
