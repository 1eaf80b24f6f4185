"""An imported history leaves the engine loop free: other conversations' work runs meanwhile.

An imported history's first request stores thousands of messages and runs many local passes
(anchors, redaction, the extractive summary, the verifier), each hundreds of milliseconds of CPU on
a large chunk; on the engine loop they stalled every other tenant's request. The history is now
stored in slices with the loop free between them, and a pass's large work runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from compaction import Engine, ExtractiveSummarizer, SummarizerChoice
from compaction import engine as engine_module
from compaction.engine import INGEST_SLICE_MESSAGES
from compaction.offload import OFF_LOOP_MIN_CHARS, off_loop
from config.settings import LiteLLMParams, ModelEntry, Settings, StoreSettings
from store.sqlite.store import Store
from tests.compaction.test_engine import SMALL, history, turn

LOOP_WAIT_S = 2.0  # how long a pass waits to see the loop run (inline, it never does)


class _Ticks:
    """Counts the engine loop's turns while running, from a task on that loop."""

    def __init__(self) -> None:
        self.count = 0
        self._stop = asyncio.Event()

    async def run(self) -> None:
        while not self._stop.is_set():
            self.count += 1
            await asyncio.sleep(0)

    def stop(self) -> None:
        self._stop.set()


class _Watching(ExtractiveSummarizer):
    """The extractive summarizer, noting for each summary whether the loop turned while it worked."""

    def __init__(self, ticks: _Ticks) -> None:
        super().__init__()
        self.ticks, self.loop_ran = ticks, list[bool]()

    def summarize(self, source: str, target_tokens: int) -> str:
        start, until = self.ticks.count, time.monotonic() + LOOP_WAIT_S
        while self.ticks.count == start and time.monotonic() < until:
            time.sleep(0.001)
        self.loop_ran.append(self.ticks.count != start)
        return super().summarize(source, target_tokens)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(StoreSettings(path=str(tmp_path / "t.db"), tenant_secret="x" * 32))
    yield s
    s.close()


@pytest.fixture
async def watched(store: Store) -> AsyncIterator[tuple[Engine, _Watching, _Ticks]]:
    ticks = _Ticks()
    summarizer = _Watching(ticks)
    settings = Settings((ModelEntry("*", LiteLLMParams("openai/*")),),
                        compaction=replace(SMALL, leaf_chunk_tokens=6_000))
    engine = Engine(store, settings, lambda t: SummarizerChoice(summarizer, {"model": summarizer.name}))
    yield engine, summarizer, ticks
    await engine.aclose()


async def test_the_loop_serves_others_while_a_large_local_pass_summarizes(
        watched: tuple[Engine, _Watching, _Ticks]) -> None:
    engine, summarizer, ticks = watched
    ticking = asyncio.create_task(ticks.run())
    try:
        prepared = await engine.prepare(turn(history(600), window=64_000,
                                             settings=replace(SMALL, leaf_chunk_tokens=6_000)))
    finally:
        ticks.stop()
        await ticking
    assert prepared.compacted and summarizer.loop_ran  # large local passes ran on this request
    assert all(summarizer.loop_ran), "a pass held the engine loop while it summarized"


async def test_a_long_history_is_stored_in_slices_with_the_loop_free_between_them(
        watched: tuple[Engine, _Watching, _Ticks], store: Store) -> None:
    engine, _, _ = watched
    messages = history(INGEST_SLICE_MESSAGES, words=2)  # about two slices and a bit more
    seen: list[int] = []

    async def watch() -> None:  # another task on the engine loop, looking at the store
        while True:
            seen.extend(c.message_count for c in store.for_tenant("tenant-a").list_conversations())
            await asyncio.sleep(0)

    watching = asyncio.create_task(watch())
    try:
        prepared = await engine.prepare(turn(messages, window=1_000_000))
    finally:
        watching.cancel()
    assert not prepared.compacted and len(prepared.messages) == len(messages)
    partial = sorted({n for n in seen if n < len(messages)})
    assert partial == [INGEST_SLICE_MESSAGES, 2 * INGEST_SLICE_MESSAGES]


async def test_a_background_step_reads_a_long_history_a_page_at_a_time(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "READ_PAGE_MESSAGES", 4)
    tenant = store.for_tenant("tenant-a")
    stored = tenant.ingest(history(5), model="m", external_id=None, count_tokens=lambda m: 1)
    ticks = _Ticks()
    ticking = asyncio.create_task(ticks.run())
    try:
        read = await engine_module._stored_messages(tenant, stored.conversation)
    finally:
        ticks.stop()
        await ticking
    assert [m.id for m in read] == [m.id for m in tenant.messages(stored.conversation.id)]
    assert len(read) == 12 and ticks.count >= 3  # three pages, the loop turning after each


async def test_small_work_stays_inline_and_large_work_moves_to_a_worker_thread() -> None:
    here = threading.get_ident()
    assert await off_loop(OFF_LOOP_MIN_CHARS - 1, threading.get_ident) == here
    assert await off_loop(OFF_LOOP_MIN_CHARS, threading.get_ident) != here


async def test_a_failure_off_the_loop_reaches_the_caller() -> None:
    def fail() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await off_loop(OFF_LOOP_MIN_CHARS, fail)
