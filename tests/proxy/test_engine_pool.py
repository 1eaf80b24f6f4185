"""EnginePool: a conversation's long work holds its own engine thread only (proxy/engine_pool.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from compaction import ChatTurn, Message, PreparedRequest
from config.settings import CompactionSettings, LiteLLMParams
from proxy.engine_pool import EnginePool, routing_key

HOLD_S = 10.0  # how long the blocking conversation would hold its thread (never reached: released)


class _ThreadHoggingEngine:
    """Prepares a turn on its engine thread; a conversation starting with "import" blocks that
    thread (synchronously, as CPU work does) until released."""

    def __init__(self, release: threading.Event, started: threading.Event) -> None:
        self.release, self.started = release, started
        self.threads: list[str] = []

    def early(self, turn: ChatTurn) -> None:
        return None

    async def prepare(self, turn: ChatTurn, early: Any = None, start: Any = None) -> PreparedRequest:
        self.threads.append(threading.current_thread().name)
        if turn.messages[0]["content"] == "import":
            self.started.set()
            self.release.wait(HOLD_S)
        return cast(PreparedRequest, turn.messages[0]["content"])

    def record_reply(self, prepared: PreparedRequest, turn: ChatTurn, message: Message) -> None: ...

    def note_cache_read(self, prepared: PreparedRequest, turn: ChatTurn, tokens: int) -> None: ...

    def after_turn(self, prepared: PreparedRequest, turn: ChatTurn) -> bool:
        return False

    async def aclose(self) -> None: ...


def _turn(first: str, tenant: str = "t1", external: str | None = None) -> ChatTurn:
    return ChatTurn(tenant_id=tenant, model="m", upstream=LiteLLMParams("openai/m"),
                    settings=CompactionSettings(), context_window=8_000,
                    messages=({"role": "user", "content": first},), external_conversation_id=external)


@pytest.fixture
async def release() -> AsyncIterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # a failing test must not leave an engine thread blocked


async def _pool(size: int, release: threading.Event) -> tuple[EnginePool, threading.Event]:
    pool, started = EnginePool(size), threading.Event()
    pool.start()
    await pool.start_engine(lambda: _ThreadHoggingEngine(release, started))
    return pool, started


@pytest.mark.parametrize("size", [1, 2])
async def test_another_conversation_is_served_while_one_holds_its_engine(
        size: int, release: threading.Event) -> None:
    pool, started = await _pool(size, release)
    try:
        importing = asyncio.create_task(pool.prepare(_turn("import")))
        assert await asyncio.to_thread(started.wait, 5)
        other = asyncio.create_task(pool.prepare(_turn("ping")))
        done, _ = await asyncio.wait({other}, timeout=1.0)
        assert (other in done) == (size > 1)  # one engine: the ping waits for the import
        release.set()
        answers = [cast(Any, (await task).request) for task in (other, importing)]
        assert answers == ["ping", "import"]
    finally:
        release.set()
        await pool.stop_engine()
        await pool.stop()


async def test_a_conversation_stays_on_its_engine(release: threading.Event) -> None:
    pool, _ = await _pool(2, release)
    try:
        engines = {id(h.engine): cast(_ThreadHoggingEngine, h.engine) for h in pool.hosts}
        for _ in range(3):
            await pool.prepare(_turn("first question", external="conv-a"))
        seen = [e.threads for e in engines.values() if e.threads]
        assert len(seen) == 1 and len(set(seen[0])) == 1 and len(seen[0]) == 3
    finally:
        await pool.stop_engine()
        await pool.stop()


@pytest.mark.parametrize(("a", "b", "same"), [
    (_turn("hello"), _turn("hello"), True),
    (_turn("hello"), _turn("hello", tenant="t2"), False),  # another tenant
    (_turn("hello"), _turn("other task"), False),
    (_turn("hello", external="x"), _turn("other task", external="x"), True),  # X-Conversation-Id wins
])
def test_routing_key(a: ChatTurn, b: ChatTurn, same: bool) -> None:
    assert (routing_key(a) == routing_key(b)) == same


def test_routing_key_of_text_parts() -> None:
    def parts(task: str) -> ChatTurn:
        content = [{"type": "text", "text": "<system-reminder>" + "x" * 30_000},
                   {"type": "text", "text": task}]
        return ChatTurn(**{**_turn("x").__dict__, "messages": ({"role": "user", "content": content},)})

    assert routing_key(parts("fix the bug")) == routing_key(parts("fix the bug"))
    # Only the first 512 characters tell conversations apart: here, one long opening part.
    assert routing_key(parts("fix the bug")) == routing_key(parts("write the docs"))
    assert routing_key(parts("a")) != routing_key(_turn("a"))


def test_routing_key_of_messages_that_are_not_objects() -> None:
    turn = _turn("x")
    odd = ChatTurn(**{**turn.__dict__, "messages": cast(Any, (["not", "an", "object"], 7))})
    assert routing_key(odd) != routing_key(turn)  # validated later; routing never raises
