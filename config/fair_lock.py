"""A reentrant lock granted in the order it was asked for.

Engine threads share the store's connection and the identity memos (proxy/engine_pool.py). Python's
locks are not fair: a thread that releases one and asks again at once, still holding the GIL, gets
it back before a waiting thread has even woken, so an engine importing a long history (thousands
of statements and memo look-ups in a row) kept another engine's one small request waiting for
the whole import. Here a release hands the lock to the longest waiting thread directly.
"""

from __future__ import annotations

import threading
from collections import deque
from types import TracebackType


class FairRLock:
    """Reentrant; on release with threads waiting, the first of them owns it next."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._owner: int | None = None
        self._depth = 0
        self._waiting: deque[tuple[int, threading.Lock]] = deque()

    def acquire(self) -> None:
        me = threading.get_ident()
        with self._mutex:
            if self._owner == me:
                self._depth += 1
                return
            if self._owner is None:
                self._owner, self._depth = me, 1
                return
            gate = threading.Lock()
            gate.acquire()
            self._waiting.append((me, gate))
        gate.acquire()  # opened by the release that made this thread the owner

    def release(self) -> None:
        with self._mutex:
            if self._owner != threading.get_ident():
                raise RuntimeError("cannot release a lock this thread does not hold")
            self._depth -= 1
            if self._depth:
                return
            if self._waiting:
                self._owner, gate = self._waiting.popleft()
                self._depth = 1
                gate.release()
            else:
                self._owner = None

    def __enter__(self) -> FairRLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
