"""Early forwarding (compaction/resend/early_forward.py): a resend of a conversation still forwarded as
received is handed over before its bookkeeping. What is handed over is exactly what the full
preparation of the same request forwards and reports (an engine with emptied caches and no early
forwarding prepares it too), the store ends up the same, and nothing else is ever handed over."""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction import engine as engine_mod
from compaction.engine import Engine
from compaction.observer import NullObserver
from compaction.resend import early_forward
from compaction.resend.early_forward import EarlyForward
from compaction.resend.previous import Resends
from compaction.types import ChatTurn, Message, PreparedRequest
from config.errors import InvalidRequestError
from config.settings import CompactionSettings, LiteLLMParams, StoreSettings
from store.sqlite.store import Store
from tests.compaction.conftest import MODEL, asst, sys, tool, user
from tests.compaction.resend.test_resend_caches import WIDE, _emptied, _engine, _seen
from tests.compaction.test_engine import history as engine_history

Pair = tuple[Engine, Store, Engine, Store]


class MismatchLog(NullObserver):
    def __init__(self) -> None:
        self.mismatches: list[tuple[str, ...]] = []

    def on_early_mismatch(self, conversation_id: str, fields: tuple[str, ...]) -> None:
        self.mismatches.append(fields)


def _pair(tmp: Path) -> Pair:
    stores = [Store.open(StoreSettings(path=str(tmp / f"{n}.db"), tenant_secret="x" * 32))
              for n in ("early", "full")]
    early, full = _engine(stores[0]), _engine(stores[1])
    early.observer = MismatchLog()
    return early, stores[0], full, stores[1]


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[Pair]:
    made = _pair(tmp_path)
    yield made
    await _close(made)


async def _close(made: Pair) -> None:
    for engine, store in ((made[0], made[1]), (made[2], made[3])):
        await engine.aclose()
        store.close()


def _turn(messages: list[Message], window: int = 200_000, **fields: Any) -> ChatTurn:
    settings = fields.pop("settings", WIDE)
    return ChatTurn("tenant-a", MODEL, LiteLLMParams("openai/" + MODEL), settings, window, tuple(messages),
                    **fields)


def _recorder() -> tuple[list[PreparedRequest], EarlyForward]:
    """An `early` callback and the list of what it was handed."""
    handed: list[PreparedRequest] = []

    async def hand_over(prepared: PreparedRequest) -> None:
        handed.append(prepared)

    return handed, hand_over


async def _both(made: Pair, turn: ChatTurn, patch: pytest.MonkeyPatch,
                reply: dict[str, Any] | None = None,
                via_loop: bool = False) -> tuple[PreparedRequest | None, bool]:
    """`turn` prepared by both engines (the full one with emptied caches), then `reply` stored
    (default "ok"); what was handed over early, and whether it is what the full preparation
    forwards and reports, with the same store (True when nothing was: stores compacted apart hold
    summaries of their own ids). `via_loop`: as EngineHost does, `Engine.early` first (the HTTP
    loop's decision; a history resent as the same dicts is what it takes), then `prepare`."""
    early, early_store, full, full_store = made
    handed, hand_over = _recorder()
    start = early.early(turn) if via_loop else None
    if start is not None:
        handed.append(start.sent)
        got = await early.prepare(turn, start=start)
    else:
        got = await early.prepare(turn, hand_over)
    stores_reply = turn.messages[-1]["role"] in ("user", "tool")
    with patch.context() as emptied:  # the full engine's caches are its own, its reply's note too
        _emptied(full_store, emptied)
        want = await full.prepare(turn)
        if stores_reply:
            full.record_reply(want, turn, reply or asst("ok"))
    if stores_reply:
        early.record_reply(got, turn, reply or asst("ok"))
    same = True
    if handed:
        cid = dataclasses.replace(handed[0], conversation_id=want.conversation_id)
        same = (_seen(got, early_store) == _seen(want, full_store) and handed[0].last_seq is None
                and early_forward.differences(cid, want) == ()
                and handed[0].conversation_id == got.conversation_id)
    return (handed[0] if handed else None), same


def _mismatches(made: Pair) -> list[tuple[str, ...]]:
    observer = made[0].observer
    assert isinstance(observer, MismatchLog)
    return observer.mismatches


@pytest.mark.parametrize("via_loop", [False, True])
async def test_an_agent_loop_is_forwarded_early_from_its_second_request(
        pair: Pair, monkeypatch: pytest.MonkeyPatch, via_loop: bool) -> None:
    history = [sys("You are terse."), user("look it up")]
    handed = []
    for step in range(6):
        # The model calls a tool (the next request ends with its result) or answers.
        reply = asst(None, [f"c{step}"]) if step % 2 else asst(f"answer {step}")
        got, same = await _both(pair, _turn(history), monkeypatch, reply, via_loop)
        assert same
        handed.append(got is not None)
        history += [reply, tool(f"c{step}", f"result {step}") if step % 2 else user(f"next {step}")]
    assert handed == [False] + [True] * 5
    assert _mismatches(pair) == []


async def test_a_rebuilt_history_is_forwarded_early_in_its_one_conversation(
        pair: Pair, monkeypatch: pytest.MonkeyPatch) -> None:
    """aider: each turn its files pair moves after the newest exchange, and the reply comes back
    trimmed; the store revises the one conversation (store/history/revisions.py)."""
    done: list[Message] = []
    handed = []
    for i in range(5):
        history = [sys("Act as a developer."), user("example"), asst("example answer"), *done, *FILES,
                   user(f"question {i}")]
        got, same = await _both(pair, _turn(history), monkeypatch, asst(f"answer {i}\n"))
        assert same
        handed.append(got is not None)
        done += [user(f"question {i}"), asst(f"answer {i}")]
    assert handed == [False] + [True] * 4
    assert _mismatches(pair) == []
    assert len(pair[1].for_tenant("tenant-a").list_conversations()) == 1


@pytest.mark.parametrize(("change", "why"), [
    (lambda h: [*h, {**user("keep this"), "pinned": True}], "a new message is pinned"),
    (lambda h: [*h, sys("a new system message"), user("go")], "a new system message"),
    (lambda h: [*h[:-1], asst("an edited reply"), user("go")], "an edited reply forks"),
    (lambda h: [*h, user("word " * 2500), asst("ok"), user("word " * 2000)], "over the budget"),
])
async def test_what_might_not_be_forwarded_as_received_is_prepared_in_full(
        pair: Pair, monkeypatch: pytest.MonkeyPatch, change: Any, why: str) -> None:
    history = [sys("You are terse."), user("one"), asst("ok"), user("two")]
    first, _ = await _both(pair, _turn(history, window=6_000), monkeypatch)
    history = [*history, asst("ok")]
    got, same = await _both(pair, _turn(change(history), window=6_000), monkeypatch)
    assert (first, got) == (None, None), why
    assert same, why
    assert _mismatches(pair) == []


@pytest.mark.parametrize("fields", [{"tools": ({"type": "function", "function": {"name": "f"}},)},
                                    {"max_reply_tokens": 500}, {"offer_recall": True},
                                    {"settings": dataclasses.replace(WIDE, fresh_tail_count=2)}])
async def test_a_request_with_other_parameters_is_prepared_in_full(
        pair: Pair, monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any]) -> None:
    history = [sys("You are terse."), user("one")]
    await _both(pair, _turn(history), monkeypatch)
    got, same = await _both(pair, _turn([*history, asst("ok"), user("two")], **fields), monkeypatch)
    assert got is None and same


async def test_a_view_saved_in_this_process_ends_early_forwarding_at_once(
        pair: Pair, monkeypatch: pytest.MonkeyPatch) -> None:
    history = engine_history(24, words=40)
    await _both(pair, _turn(history), monkeypatch)
    early, store = pair[0], pair[1]
    cid = store.for_tenant("tenant-a").list_conversations()[0].id
    await early.compact(_turn(history), cid)  # an operator's compaction, here: it saves a view
    assert store.for_tenant("tenant-a").view(cid) is not None
    handed, hand_over = _recorder()
    got = await early.prepare(_turn([*history, asst("ok"), user("two")]), hand_over)
    assert handed == [] and got.compacted
    assert _mismatches(pair) == []


async def test_a_view_saved_by_another_process_is_found_by_the_bookkeeping(
        pair: Pair, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is read before an early forward: a view another process saved meanwhile is found
    after ingest. That request went uncompacted (within budget); its record is the full plan's,
    the difference is reported, and the next request is prepared in full."""
    history = engine_history(24, words=40)
    await _both(pair, _turn(history), monkeypatch)
    early, store = pair[0], pair[1]
    cid = store.for_tenant("tenant-a").list_conversations()[0].id
    other = _engine(store)  # another process's engine on the same store (its own memory)
    with monkeypatch.context() as elsewhere:
        elsewhere.setattr(engine_mod, "RESENDS", Resends())
        await other.compact(_turn(history), cid)
    await other.aclose()
    handed, hand_over = _recorder()
    history = [*history, asst("ok"), user("two")]
    got = await early.prepare(_turn(history), hand_over)
    assert [len(h.messages) for h in handed] == [len(history)]
    assert got.compacted and len(got.messages) < len(history)  # the plan starts from the view
    assert _mismatches(pair) and "messages" in _mismatches(pair)[0]
    early.record_reply(got, _turn(history), asst("ok"))
    handed.clear()
    await early.prepare(_turn([*history, asst("ok"), user("three")]), hand_over)
    assert handed == []


async def _replied(made: Pair, history: list[Message], reply: Message) -> None:
    """`history` prepared by the early engine and `reply` stored: what the next request resends."""
    early = made[0]
    prepared = await early.prepare(_turn(history))
    early.record_reply(prepared, _turn(history), reply)


async def test_the_http_loop_takes_a_resend_of_the_previous_requests_own_messages(pair: Pair) -> None:
    """`Engine.early`: the previous request's dicts, then its reply and a new question (a body
    parsed past its resent part hands those over): forwarded before any store work, and the full
    preparation agrees."""
    history = [sys("You are terse."), user("one")]
    reply = asst("ok")
    await _replied(pair, history, reply)
    turn = _turn([*history, dict(reply), user("two")])  # the echoed reply: an equal, new dict
    start = pair[0].early(turn)
    assert start is not None and [m["content"] for m in start.sent.messages] == ["You are terse.", "one",
                                                                                "ok", "two"]
    prepared = await pair[0].prepare(turn, start=start)
    assert early_forward.differences(start.sent, prepared) == () and _mismatches(pair) == []
    assert len(pair[1].for_tenant("tenant-a").messages(prepared.conversation_id)) == 4


@pytest.mark.parametrize(("new", "why"), [
    ([asst("an edited reply"), user("two")], "the stored reply edited: ingest would fork"),
    ([asst("ok"), user("word " * 20_000)], "more new bytes than the loop takes on"),
    ([user("two")], "no reply stored after the previous request: would it fork?"),
])
async def test_the_http_loop_leaves_what_it_cannot_be_sure_of_to_the_engine(
        pair: Pair, new: list[dict[str, Any]], why: str) -> None:
    history = [sys("You are terse."), user("one")]
    if new[0]["role"] == "assistant":
        await _replied(pair, history, asst("ok"))
    else:
        await pair[0].prepare(_turn(history))
    assert pair[0].early(_turn([*history, *new])) is None, why


async def test_the_http_loop_refuses_an_invalid_new_message_as_the_engine_would(pair: Pair) -> None:
    history = [sys("You are terse."), user("one")]
    await _replied(pair, history, asst("ok"))
    with pytest.raises(InvalidRequestError) as raised:
        pair[0].early(_turn([*history, asst("ok"), {"role": "user", "content": 5}]))
    assert raised.value.param == "messages[3].content"


# Each step appends to the history: a user turn, a tool round, a pinned or system message, or a
# long message that may cross the budget (then the conversation compacts and is prepared in full).
STEPS = st.lists(st.sampled_from(["user", "tools", "pinned", "system", "long", "rebuild"]),
                 min_size=2, max_size=7)
FILES = [user("I have added these files to the chat: notes.txt"), asst("Ok, any changes go to those files.")]


def _files_moved(history: list[Message], i: int) -> list[Message]:
    """aider's next turn: its files pair moves from before the newest exchange to after it."""
    return [*(m for m in history if m not in FILES), *FILES, user(f"question {i}")]


def _step(history: list[Message], kind: str, i: int) -> list[Message]:
    if history[-1]["role"] in ("user", "tool"):
        history = [*history, asst("ok")]
    if kind == "rebuild":
        return _files_moved(history, i)
    return {
        "user": lambda: [*history, user(f"question {i}")],
        "tools": lambda: [*history, asst(None, [f"t{i}"]), tool(f"t{i}", f"found {i}"), user("and?")],
        "pinned": lambda: [*history, {**user(f"remember {i}"), "pinned": True}],
        "system": lambda: [*history, sys(f"note {i}"), user(f"after note {i}")],
        "long": lambda: [*history, user(f"long {i} " + "word " * 900)],
    }[kind]()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS, via_loop=st.booleans())
def test_whatever_is_handed_over_is_what_the_full_preparation_forwards(
        steps: list[str], via_loop: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    async def run() -> None:
        with tempfile.TemporaryDirectory() as tmp, monkeypatch.context() as fresh:
            fresh.setattr(engine_mod, "RESENDS", Resends())  # each example a new process's
            made = _pair(Path(tmp))
            try:
                history = [sys("You are terse."), user("start")]
                for i, kind in enumerate(["user", *steps]):
                    history = _step(history, kind, i) if i else history
                    _, same = await _both(made, _turn(history, window=4_000,
                                                      settings=CompactionSettings(background=False)),
                                          monkeypatch, via_loop=via_loop)
                    assert same
                assert _mismatches(made) == []
            finally:
                await _close(made)

    asyncio.run(run())
