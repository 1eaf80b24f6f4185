"""A summarizer that takes 3 s per call barely ever blocks a turn, and one
that never answers in time delays a turn that must compact by at most its deadline.

Turns follow back to back as an agent sends them; the fake model takes `MODEL_DELAY_S` to answer.
Background compaction runs off the request path, so at most 1 turn in 20 waits on the summarizer.
Waits are read from the proxy's `X-Ctxproxy-Summarizer-Wait` response header (the engine's
PreparedRequest.waited_on_summarizer), cross-checked with the engine's own record; no timing asserts.
"""

from __future__ import annotations

import asyncio

from tests.e2e.conftest import RigFactory
from tests.e2e.conversation import Conversation, generate, reply_message
from tests.e2e.harness import JSON, MODEL, CachedCounter, budget_for, paced_replay, request_tokens
from tests.fakes.upstream import Reply
from tests.sdk_params import sdk_messages, sdk_tools

TURNS = 60
SUMMARIZER_DELAY_S = 3.0
MODEL_DELAY_S = 0.4


async def test_slow_summarizer_rarely_blocks_a_turn(rig: RigFactory) -> None:
    r = await rig("slow", delay_s=SUMMARIZER_DELAY_S)
    conv = generate(turns=150, seed=7)
    result = await paced_replay(r.client, conv, r.model, r.engine, turns=TURNS,
                                model_delay_s=MODEL_DELAY_S)
    await r.engine.drain_background()
    waited = [i for i, w in enumerate(result.waits) if w == "true"]
    assert result.waits and all(w in ("true", "false") for w in result.waits)
    assert waited == [i for i, p in enumerate(result.prepared) if p.waited_on_summarizer]
    assert r.summarizer.requests, "the slow summarizer was really used (background steps)"
    print(f"\n[slow summarizer] {len(waited)} of {TURNS} turns waited: {waited}; "
          f"{len(r.summarizer.requests)} summarizer calls")
    assert len(waited) * 20 <= TURNS, f"turns {waited} waited on the summarizer"
    counter = CachedCounter(MODEL)
    assert all(request_tokens(counter, b) <= budget_for() for b in result.forwarded)


HANG_GUARD_S = 120.0  # only so a regression fails instead of hanging; never a timing assertion


def full_history(conv: Conversation, turns: int) -> list[JSON]:
    """The client's history after `turns` steps, the scripted answers included."""
    history: list[JSON] = [conv.system]
    for step in conv.steps[:turns]:
        history += [dict(m) for m in step.client] + [reply_message(step)]
    while history[-1]["role"] == "assistant" and not history[-1].get("tool_calls"):
        history.pop()  # end on the client's side: a request
    return history


async def test_a_request_that_must_compact_is_answered_past_a_stuck_summarizer(rig: RigFactory) -> None:
    """The summarizer never answers in time (without a deadline the request would wait out the whole
    call). The request's compaction deadline passes and it is answered with local summaries; the
    stuck call goes on off the request path."""
    r = await rig("slow", delay_s=600.0, deadline_s=0.5)
    conv = generate(turns=150, seed=7)
    history = full_history(conv, 120)
    assert CachedCounter(MODEL).count_messages(history) > budget_for()  # it must compact now
    r.model.queue(Reply(text="Here is where we are."))
    raw = await asyncio.wait_for(r.client.chat.completions.with_raw_response.create(
        model=MODEL, messages=sdk_messages(history), tools=sdk_tools(conv.tools)), HANG_GUARD_S)
    assert raw.parse().choices[0].message.content == "Here is where we are."
    assert raw.headers["x-ctxproxy-summarizer-wait"] == "true"
    prepared = r.engine.prepared[-1]
    assert prepared.tokens_forwarded <= prepared.budget and prepared.summary_ids
    levels = {e.level for e in prepared.events if e.outcome == "committed"}
    assert "extractive" in levels and levels <= {"extractive", "truncation", "elision"}
    assert len(r.summarizer.requests) <= 1  # at most one LLM call, cut at the deadline
