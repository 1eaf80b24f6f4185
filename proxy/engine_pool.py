"""Several engine threads, so that no conversation waits on another's work.

One engine thread (proxy/engine_host.py) runs one conversation's work at a time: a client importing
a 50,000-message history held it for seconds, and every other client's request waited behind it.
The pool runs `server.engine_threads` engines, each on its own thread with its own loop, over the
one store (its connection is shared under the store's lock, a statement or a transaction at a time).
A conversation's requests go to one engine, which orders them (its per-conversation lock); a new
conversation goes to the engine with the least work in flight, so a heavy one leaves the others
served: their threads take turns on the GIL every few milliseconds instead of waiting for the heavy
work to end. The engines share the store and the process-wide memos, exactly as `--workers` processes
share the store: a conversation that moves between engines (its routing entry forgotten) is as
correct as one that moves between workers.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

from compaction import ChatTurn, Message
from config.sized_lru import SizedLru
from proxy.engine_host import EngineHost, HostedEngine, Preparing

Result = TypeVar("Result")
ROUTES_HELD = 65_536  # conversation keys -> engine; a forgotten key is routed again (locality only)
KEY_CHARS = 512  # of the first messages' text, what tells conversations apart for routing
# How long a thread holds the GIL when another wants it (Python's default is 5 ms). A small request
# gives the GIL up at each store call and thread hop and waits that long to get it back from an
# engine busy with a long import: 1 ms cut another client's p50 during a 50,000-message import by a
# fifth; 0.2 ms cut it from 37 to 24 ms and its p99 from 136 to 105 ms (means of six runs each,
# bench.import_stall), the import as fast and small-request throughput unchanged within noise.
SWITCH_INTERVAL_S = 0.0002


def routing_key(turn: ChatTurn) -> str:
    """What keeps a conversation's requests on one engine: its tenant and its external id, else
    the start of its first two messages (a conversation's identity is a hash chain from its first
    message; forks of it share that start, and go where it went)."""
    if turn.external_conversation_id:
        head = "id:" + turn.external_conversation_id
    else:
        head = "\x00".join(_text(m) for m in turn.messages[:2])
    return hashlib.blake2b(f"{turn.tenant_id}\x00{head}".encode("utf-8", "surrogatepass"),
                           digest_size=12).hexdigest()


def _text(message: Message) -> str:
    """Role and the start of the content of a message as received (not validated yet: any JSON
    value), never rendering more of it than KEY_CHARS (an agent's first message is tens of KB)."""
    if not isinstance(message, dict):
        return _head(message)
    return f"{message.get('role')}:{_head(message.get('content'))}"


def _head(value: object) -> str:
    """The first KEY_CHARS characters of a content value: a string, text parts, or anything else."""
    if isinstance(value, str):
        return value[:KEY_CHARS]
    if isinstance(value, list):
        out = ""
        for part in value:
            out += _head(part.get("text", part.get("type")) if isinstance(part, dict) else part)
            if len(out) >= KEY_CHARS:
                break
        return out[:KEY_CHARS]
    return repr(value)[:KEY_CHARS] if not isinstance(value, dict) else _head(value.get("text"))


class EnginePool:
    """`size` EngineHosts with one engine each; the same calls as one EngineHost, routed."""

    def __init__(self, size: int = 1) -> None:
        if size < 1:
            raise ValueError("an engine pool needs at least one engine")
        self.hosts = tuple(EngineHost(f"ctxproxy-engine-{i}" if size > 1 else "ctxproxy-engine")
                           for i in range(size))
        self._busy = [0] * size  # requests in flight on each engine
        self._routes: SizedLru[str, int] = SizedLru(ROUTES_HELD)
        self._switch_interval = sys.getswitchinterval()

    @property
    def engine(self) -> HostedEngine:
        return self.hosts[0].engine

    def start(self) -> None:
        """Start the engine threads (and, with more than one, a shorter GIL switch interval)."""
        if len(self.hosts) > 1:
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        for host in self.hosts:
            host.start()

    async def stop(self) -> None:
        for host in self.hosts:
            await host.stop()
        sys.setswitchinterval(self._switch_interval)

    async def start_engine(self, make: Callable[[], HostedEngine]) -> HostedEngine:
        """One engine per thread, each built on its own thread; returns the first."""
        for host in self.hosts:
            await host.start_engine(make)
        return self.engine

    async def stop_engine(self) -> None:
        for host in self.hosts:
            await host.stop_engine()

    async def call(self, make: Callable[[], Awaitable[Result]]) -> Result:
        """Await `make()` on the least busy engine's loop."""
        return await self.hosts[self._least_busy()].call(make)

    async def run(self, fn: Callable[[], Result]) -> Result:
        """Run the synchronous `fn` (a store call) on the least busy engine's thread."""
        return await self.hosts[self._least_busy()].run(fn)

    async def prepare(self, turn: ChatTurn) -> Preparing:
        """`turn` prepared by its conversation's engine (EngineHost.prepare)."""
        index = self._route(turn)
        return await self._counted(index, self.hosts[index].prepare(turn))

    async def finish_turn(self, preparing: Preparing, turn: ChatTurn, reply: Message | None,
                          cache_read: int | None = None) -> None:
        """The turn's end on the engine that prepared it (EngineHost.finish_turn)."""
        index = self._route(turn)
        await self._counted(index, self.hosts[index].finish_turn(preparing, turn, reply, cache_read))

    async def _counted(self, index: int, work: Awaitable[Result]) -> Result:
        """`work` awaited, counted among engine `index`'s requests in flight meanwhile."""
        self._busy[index] += 1
        try:
            return await work
        finally:
            self._busy[index] -= 1

    async def each(self, make: Callable[[EngineHost], Awaitable[None]]) -> None:
        """`make(host)` for every engine in turn (draining background work, say)."""
        for host in self.hosts:
            await make(host)

    def _route(self, turn: ChatTurn) -> int:
        if len(self.hosts) == 1:
            return 0
        key = routing_key(turn)
        index = self._routes.get(key)
        if index is None:
            index = self._least_busy()
            self._routes.put(key, index, 1)
        return index

    def _least_busy(self) -> int:
        """The engine with the fewest requests in flight (the first of equals)."""
        return min(range(len(self.hosts)), key=self._busy.__getitem__)
