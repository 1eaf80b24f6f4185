"""The engine and the store on their own thread, with their own event loop.

The store's calls are synchronous (sqlite3, psycopg) and ingesting or planning a large request is
CPU work: on the HTTP loop they would stall every other request, `/healthz` included. So the
engine, its background steps and every store call of a running server happen on one "engine"
thread; HTTP handlers only await the results (`prepare`, `finish_turn`, `run`). One thread also
means the store's connection is only ever used by one thread, as sqlite3 wants.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from compaction.types import ChatTurn, PreparedRequest

Result = TypeVar("Result")


class HostedEngine(Protocol):
    """What the host calls of compaction.engine.Engine (tests pass fakes)."""

    async def prepare(self, turn: ChatTurn) -> PreparedRequest: ...

    def record_reply(self, prepared: PreparedRequest, turn: ChatTurn, message: dict[str, Any]) -> None: ...

    def after_turn(self, prepared: PreparedRequest, turn: ChatTurn) -> bool: ...

    async def aclose(self) -> None: ...


class StoreRunner(Protocol):
    """Runs a store call where the store lives (EngineHost; inline in a CLI or a test)."""

    async def run(self, fn: Callable[[], Result]) -> Result: ...


class InlineRunner:
    """A StoreRunner for code that owns its store on the current thread (CLI commands, tests)."""

    async def run(self, fn: Callable[[], Result]) -> Result:
        return fn()


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
        async def made() -> Result:
            return await make()

        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(made(), self._loop))

    async def run(self, fn: Callable[[], Result]) -> Result:
        """Run the synchronous `fn` (a store call) on the engine thread."""
        async def ran() -> Result:
            return fn()

        return await self.call(ran)

    async def prepare(self, turn: ChatTurn) -> PreparedRequest:
        return await self.call(lambda: self.engine.prepare(turn))

    async def finish_turn(self, prepared: PreparedRequest, turn: ChatTurn,
                          reply: dict[str, Any] | None) -> None:
        """Store the reply (when there is one), then schedule background work when due."""
        def finish() -> None:
            if reply is not None:
                self.engine.record_reply(prepared, turn, reply)
            self.engine.after_turn(prepared, turn)

        await self.run(finish)

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
