"""Steps keep what a newer message refers back to raw and give superseded tool output way first."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.engine import Engine
from compaction.toolpairs import validate_outgoing
from compaction.types import ChatTurn, Message, SummarizerChoice
from config.settings import CompactionSettings, LiteLLMParams, ModelEntry, Settings, StoreSettings
from store.sqlite.store import Store
from tests.compaction.conftest import MODEL, sys, user
from tests.fakes.summarizer import ScriptedSummarizer

SMALL = CompactionSettings(fresh_tail_count=6, leaf_min_fanout=4, leaf_chunk_tokens=3_000,
                           leaf_target_tokens=200, condensed_target_tokens=300,
                           summarize_message_threshold=10, reserve_tokens=1_000,
                           safety_margin_tokens=100)
MARKER = "Wasted call — file unchanged since your last Read. Refer to that earlier tool_result instead."
BIG_FILE = "".join(f"{i:4}\tdef handler_{i}(request): return route_{i}(request)\n" for i in range(60))


def call(cid: str, name: str, **args: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def result(cid: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def turn(messages: list[Message], window: int = 8_000) -> ChatTurn:
    return ChatTurn("tenant-a", MODEL, LiteLLMParams("openai/" + MODEL), SMALL, window, tuple(messages))


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    store = Store.open(StoreSettings(path=str(tmp_path / "t.db"), tenant_secret="x" * 32))
    summarizer = ScriptedSummarizer("faithful")
    settings = Settings((ModelEntry("*", LiteLLMParams("openai/*")),), compaction=SMALL)
    e = Engine(store, settings, lambda t: SummarizerChoice(summarizer, {"model": summarizer.name}))
    yield e
    await e.aclose()
    store.close()


def session(rounds: int) -> list[Message]:
    """A task, a read of a big file, then `rounds` rounds of other tool work."""
    msgs: list[Message] = [sys("You are a coding agent."), user("Fix the routing bug in src/app.py."),
                           call("read1", "Read", file_path="/src/app.py"), result("read1", BIG_FILE)]
    for i in range(rounds):
        msgs += [call(f"g{i}", "Grep", pattern=f"route_{i}"),
                 result(f"g{i}", f"src/mod_{i}.py: uses route_{i} " + "match line " * 60)]
    return msgs


def marker_round(n: int) -> list[Message]:
    return [call(f"reread{n}", "Read", file_path="/src/app.py"), result(f"reread{n}", MARKER)]


def forwarded_ok(prepared: Any, msgs: list[Message]) -> None:
    assert prepared.tokens_forwarded <= prepared.budget
    validate_outgoing(prepared.messages, msgs)


async def test_the_read_a_marker_refers_to_is_forwarded_raw(engine: Engine) -> None:
    msgs = session(40) + marker_round(1)
    prepared = await engine.prepare(turn(msgs))
    forwarded_ok(prepared, msgs)
    assert prepared.summary_ids  # the history was compacted ...
    assert {"role": "tool", "tool_call_id": "read1", "content": BIG_FILE} in prepared.messages  # ... not it
    assert msgs[2] in prepared.messages  # with its call


async def test_a_read_summarized_before_the_marker_came_is_brought_back_raw(engine: Engine) -> None:
    msgs = session(40)
    first = await engine.prepare(turn(msgs))
    assert first.summary_ids and BIG_FILE not in [m.get("content") for m in first.messages]
    msgs += [{"role": "assistant", "content": "Let me look at the file again."}, user("go on"),
             *marker_round(1)]
    again = await engine.prepare(turn(msgs))
    forwarded_ok(again, msgs)
    assert {"role": "tool", "tool_call_id": "read1", "content": BIG_FILE} in again.messages
    msgs += [call("later", "Grep", pattern="x"), result("later", "nothing " * 50)]
    later = await engine.prepare(turn(msgs))  # still referred to: still raw
    forwarded_ok(later, msgs)
    assert {"role": "tool", "tool_call_id": "read1", "content": BIG_FILE} in later.messages


async def test_a_superseded_test_run_gives_way_to_a_pointer_to_the_newer_run(engine: Engine) -> None:
    old_run = "FAILED tests/test_app.py::test_route - AssertionError\n" + "trace line\n" * 200
    msgs: list[Message] = [sys("You are a coding agent."), user("Make the tests pass."),
                           call("t1", "Bash", command="pytest -q", description="run tests"),
                           result("t1", old_run)]
    for i in range(30):
        msgs += [call(f"e{i}", "Edit", file_path=f"/src/m{i}.py"), result(f"e{i}", f"edited m{i} " * 40)]
    msgs += [call("t2", "Bash", command="pytest -q", description="run them again"),
             result("t2", "1 passed in 0.1s")]
    prepared = await engine.prepare(turn(msgs, 6_000))
    forwarded_ok(prepared, msgs)
    tenant = engine.store.for_tenant("tenant-a")
    stored = {m.message.get("tool_call_id"): m for m in tenant.messages(prepared.conversation_id)}
    first = prepared.events[0]  # before anything is summarized
    assert (first.level, first.source_message_ids) == ("elision", (stored["t1"].id,))
    (record,) = [r for r in tenant.summaries(prepared.conversation_id) if r.id == first.summary_id]
    assert "superseded output of Bash" in record.content
    assert f"message {stored['t2'].id}" in record.content  # names where the newer copy is
    assert old_run not in [m.get("content") for m in prepared.messages]
    assert stored["t1"].message["content"] == old_run  # lossless in the store


@st.composite
def agent_session(draw: st.DrawFn) -> list[Message]:
    """Tool rounds over a few files and commands, re-reads, markers and re-runs among them."""
    msgs: list[Message] = [sys("You are a coding agent."), user("Do the task.")]
    read: set[str] = set()
    for i in range(draw(st.integers(5, 45))):
        path = f"/src/f{draw(st.integers(0, 4))}.py"
        kind = draw(st.sampled_from(["read", "bash", "grep"]))
        if kind == "read":
            fresh = f"{path} v{i}\n" + "code line\n" * draw(st.integers(5, 300))
            body = MARKER if path in read and draw(st.booleans()) else fresh
            read.add(path)
            msgs += [call(f"c{i}", "Read", file_path=path), result(f"c{i}", body)]
        elif kind == "bash":
            out = draw(st.sampled_from(["1 failed", "2 passed", "error\n" * 150]))
            msgs += [call(f"c{i}", "Bash", command="pytest -q"), result(f"c{i}", out)]
        else:
            hits = "hit " * draw(st.integers(1, 200))
            msgs += [call(f"c{i}", "Grep", pattern=f"p{i}"), result(f"c{i}", hits)]
    return msgs


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(msgs=agent_session(), window=st.sampled_from([3_000, 6_000, 12_000]))
async def test_pairing_and_budget_hold_with_references_and_reruns(engine: Engine, msgs: list[Message],
                                                                 window: int) -> None:
    prepared = await engine.prepare(turn(msgs, window))
    forwarded_ok(prepared, msgs)
