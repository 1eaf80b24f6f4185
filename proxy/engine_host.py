"""The engine and the store on their own thread, with their own event loop.

The store's calls are synchronous (sqlite3, psycopg) and ingesting or planning a large request is
CPU work: on the HTTP loop they would stall every other request, `/healthz` included. So the
engine, its background steps and every store call of a running server happen on one "engine"
thread; HTTP handlers only await the results (`prepare`, `finish_turn`, `run`). Several such
threads share the store's connection under its lock (proxy/engine_pool.py), as does a long
history's read-ahead in a worker thread (compaction/engine.py `_ingest`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

import structlog

from compaction import ChatTurn, EarlyForward, EarlyStart, Message, PreparedRequest

Result = TypeVar("Result")
HAND_OVER_YIELD_S = 0.001  # the engine thread's pause after handing a request over early...
HAND_OVER_YIELD_MESSAGES = 64  # ...when its bookkeeping is long enough to compete with forwarding it
log = structlog.get_logger(__name__)


class HostedEngine(Protocol):
    """What the host calls of compaction.engine.Engine (tests pass fakes)."""

    def early(self, turn: ChatTurn) -> EarlyStart | None: ...

    async def prepare(self, turn: ChatTurn, early: EarlyForward | None = None,
                      start: EarlyStart | None = None) -> PreparedRequest: ...

    def record_reply(self, prepared: PreparedRequest, turn: ChatTurn, message: Message) -> None: ...

    def note_cache_read(self, prepared: PreparedRequest, turn: ChatTurn, tokens: int) -> None: ...

    def after_turn(self, prepared: PreparedRequest, turn: ChatTurn) -> bool: ...

    async def aclose(self) -> None: ...


class StoreRunner(Protocol):
    """Runs a store call where the store lives (EngineHost; inline in a CLI or a test)."""

    async def run(self, fn: Callable[[], Result]) -> Result: ...


class InlineRunner:
    """A StoreRunner for code that owns its store on the current thread (CLI commands, tests)."""

    async def run(self, fn: Callable[[], Result]) -> Result:
        return fn()


@dataclass(frozen=True)
class Preparing:
    """The request to forward; `settled` is its full preparation, still running on the engine thread
    when the engine handed the request over early (compaction/resend/early_forward.py)."""

    request: PreparedRequest
    settled: concurrent.futures.Future[PreparedRequest] | None = None


class EngineHost:
    """A daemon thread running an asyncio loop: the engine's and the store's home.

    Work submitted from another loop keeps the caller's context variables (log bindings) and is
    cancelled on the engine loop when the caller is cancelled (a client that went away).
    """

    def __init__(self, name: str = "ctxproxy-engine") -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._engine: HostedEngine | None = None

    @property
    def engine(self) -> HostedEngine:
        if self._engine is None:
            raise RuntimeError("internal: the engine host has no engine yet")
        return self._engine

    def start(self) -> None:
        self._thread.start()

    async def stop(self) -> None:
        """Close the engine if it is still open, then end the thread (its loop closes there)."""
        await self.stop_engine()
        self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.to_thread(self._thread.join)

    async def start_engine(self, make: Callable[[], HostedEngine]) -> HostedEngine:
        """Build the engine on the engine thread (its locks and tasks belong to that loop)."""
        self._engine = await self.run(make)
        return self._engine

    async def stop_engine(self) -> None:
        """Close the engine on its own loop (its background steps end there)."""
        if self._engine is not None:
            engine, self._engine = self._engine, None
            await self.call(engine.aclose)

    async def call(self, make: Callable[[], Awaitable[Result]]) -> Result:
        """Await the coroutine `make()` run on the engine loop."""
        done: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        return await self._await(done, self._submit(make, done, _outcome))

    async def run(self, fn: Callable[[], Result]) -> Result:
        """Run the synchronous `fn` (a store call) on the engine thread."""
        caller = asyncio.get_running_loop()
        done: asyncio.Future[Result] = caller.create_future()

        def work() -> None:  # on the engine thread: no task needed for a plain call
            if done.cancelled():
                return
            try:
                result = fn()
            except Exception as exc:
                caller.call_soon_threadsafe(_fail, done, exc)
            else:
                caller.call_soon_threadsafe(_succeed, done, result)

        self._loop.call_soon_threadsafe(work)
        return await done

    async def prepare(self, turn: ChatTurn) -> Preparing:
        """`turn` prepared by the engine: handed over early when the engine can (its bookkeeping
        goes on meanwhile, `Preparing.settled`), else once prepared in full. A resend the engine
        recognises from memory is handed over from this loop, without waiting on the engine thread."""
        start = self.engine.early(turn)  # bounded work (compaction/resend/previous.py `extension`)
        if start is not None:
            return Preparing(start.sent, self._settle(turn, start))
        first: asyncio.Future[Preparing] = asyncio.get_running_loop().create_future()

        async def hand_over(prepared: PreparedRequest) -> None:  # in the task below, on the engine thread
            settled = concurrent.futures.Future[PreparedRequest]()
            _chain(cast("asyncio.Task[PreparedRequest]", asyncio.current_task()), settled)
            first.get_loop().call_soon_threadsafe(_succeed, first, Preparing(prepared, settled))
            await _let_forward(prepared)

        started = self._submit(lambda: self.engine.prepare(turn, hand_over), first, _prepared)
        return await self._await(first, started)

    def _settle(self, turn: ChatTurn, start: EarlyStart) -> concurrent.futures.Future[PreparedRequest]:
        """The full preparation of a request handed over from the HTTP loop, on the engine thread;
        a failure is logged (the reply is then not stored; the next resend stores the messages)."""
        async def settle() -> PreparedRequest:
            await _let_forward(start.sent)
            return await self.engine.prepare(turn, start=start)

        settled = asyncio.run_coroutine_threadsafe(settle(), self._loop)
        settled.add_done_callback(_log_settle_failure)
        return settled

    def _submit(self, make: Callable[[], Awaitable[Result]], done: asyncio.Future[Any],
                report: Callable[[asyncio.Future[Any], asyncio.Task[Result]], None]
                ) -> list[asyncio.Task[Result]]:
        """Start `make()` as a task on the engine loop (unless `done` was cancelled first); its end is
        reported to `done` on the caller's loop by `report`. The list gets the task once started."""
        caller, started = done.get_loop(), list[asyncio.Task[Result]]()

        def start() -> None:
            if done.cancelled():
                return
            task = self._loop.create_task(_awaited(make))
            started.append(task)
            task.add_done_callback(lambda ended: caller.call_soon_threadsafe(report, done, ended))

        self._loop.call_soon_threadsafe(start)  # the caller's context variables go with it
        return started

    async def _await(self, done: asyncio.Future[Result], started: list[asyncio.Task[Any]]) -> Result:
        """`done`'s result; a caller cancelled (a client gone) cancels the task on the engine loop."""
        try:
            return await done
        except asyncio.CancelledError:
            if started:
                self._loop.call_soon_threadsafe(started[0].cancel)
            raise

    async def finish_turn(self, preparing: Preparing, turn: ChatTurn, reply: Message | None,
                          cache_read: int | None = None) -> None:
        """Store the reply (when there is one), schedule background work when due, then keep the
        provider's reported cache reads; after the request's full preparation, when it was forwarded
        early (its stored ids are needed)."""
        def finished(prepared: PreparedRequest) -> None:
            if reply is not None:
                self.engine.record_reply(prepared, turn, reply)
            self.engine.after_turn(prepared, turn)
            if cache_read is not None:
                self.engine.note_cache_read(prepared, turn, cache_read)

        settled = preparing.settled
        if settled is None or settled.done():  # a plain call: no task on the engine loop
            prepared = preparing.request if settled is None else settled.result()
            await self.run(lambda: finished(prepared))
            return

        async def after_settling() -> None:  # waits there, not here: one hop fewer when it ends
            finished(await asyncio.wrap_future(settled))

        await self.call(after_settling)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            # Tasks still pending (litellm's logging worker, say) end here, before the loop closes.
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()


async def _awaited(make: Callable[[], Awaitable[Result]]) -> Result:
    return await make()


def _succeed(done: asyncio.Future[Result], result: Result) -> None:
    if not done.done():
        done.set_result(result)


def _fail(done: asyncio.Future[Any], exc: BaseException) -> None:
    if not done.done():
        done.set_exception(exc)


def _outcome(done: asyncio.Future[Any], task: asyncio.Task[Any],
             wrap: Callable[[Any], Any] = lambda result: result) -> None:
    """Copy an ended task's outcome (its result through `wrap`) to `done`, the caller's future."""
    if task.cancelled():
        done.cancel()
    elif (exc := task.exception()) is not None:
        _fail(done, exc)
    else:
        _succeed(done, wrap(task.result()))


def _prepared(first: asyncio.Future[Preparing], task: asyncio.Task[PreparedRequest]) -> None:
    """The full preparation ended: the answer, unless the request was handed over early (then its
    `settled` future has the outcome, chained by `hand_over`)."""
    if not first.done():
        _outcome(first, task, Preparing)
    elif not task.cancelled():
        task.exception()  # retrieved: asyncio does not log it; `settled` carries it


async def _let_forward(prepared: PreparedRequest) -> None:
    """The bookkeeping would hold the GIL while the HTTP loop forwards the request: let the loop
    take it first (measured on a resent 100k-token history: 1.5 ms less added p50). A short
    history's is quicker than the pause, which a fast provider would then wait on."""
    if len(prepared.messages) >= HAND_OVER_YIELD_MESSAGES:
        await asyncio.sleep(HAND_OVER_YIELD_S)


def _chain(task: asyncio.Task[Result], settled: concurrent.futures.Future[Result]) -> None:
    """Copy `task`'s outcome to `settled` when it ends; a failure is logged there."""
    def copy(ended: asyncio.Task[Result]) -> None:
        if ended.cancelled():
            settled.cancel()
        elif (exc := ended.exception()) is not None:
            settled.set_exception(exc)
        else:
            settled.set_result(ended.result())

    task.add_done_callback(copy)
    settled.add_done_callback(_log_settle_failure)


def _log_settle_failure(settled: concurrent.futures.Future[Any]) -> None:
    """A request's bookkeeping failed after it was handed over: its reply is not stored (the next
    resend stores the messages)."""
    failure = None if settled.cancelled() else settled.exception()
    if failure is not None:
        log.error("early_forward_settle_failed", error=type(failure).__name__)
