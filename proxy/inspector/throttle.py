"""Back-off on failed admin-key attempts (login form and Bearer alike), per source, in bounded memory.

Only failures are counted: a right key, a valid session cookie or a request with no credentials
never moves a source towards a lockout. A locked source's attempts are refused (429) without the
key being compared, so a source can test at most FAILURE_LIMIT keys a FAILURE_WINDOW_S. Sources are
client addresses (see proxy/inspector/source.py): behind a configured trusted proxy an attacker
locks out only its own address, never the operator's.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

FAILURE_LIMIT = 5  # failed attempts from one source within FAILURE_WINDOW_S...
FAILURE_WINDOW_S = 60.0
LOCKOUT_S = 60.0  # ...lock that source out for this long
MAX_TRACKED_SOURCES = 4096  # hard bound on both tables: the least recently failed are forgotten
V = TypeVar("V")


@dataclass
class FailureThrottle:
    """Sliding-window failure counts and lockouts per source, each table an LRU of bounded size."""

    clock: Callable[[], float] = time.time
    max_sources: int = MAX_TRACKED_SOURCES
    failures: OrderedDict[str, deque[float]] = field(default_factory=OrderedDict)
    locked_until: OrderedDict[str, float] = field(default_factory=OrderedDict)

    def retry_after(self, source: str) -> int:
        """Seconds this source must still wait before its next attempt is checked (0: now)."""
        until = self.locked_until.get(source)
        if until is None:
            return 0
        remaining = until - self.clock()
        if remaining <= 0:
            del self.locked_until[source]
            return 0
        return int(remaining + 0.999)

    def failed(self, source: str) -> None:
        """Count a failure; the FAILURE_LIMIT-th within the window locks the source out."""
        now = self.clock()
        recent = self.failures.pop(source, None) or deque()
        recent.append(now)
        while recent and recent[0] <= now - FAILURE_WINDOW_S:
            recent.popleft()
        if len(recent) >= FAILURE_LIMIT:
            self.locked_until.pop(source, None)
            self.locked_until[source] = now + LOCKOUT_S
            _trim(self.locked_until, self.max_sources)
            return
        self.failures[source] = recent  # most recent at the end
        _trim(self.failures, self.max_sources)

    def succeeded(self, source: str) -> None:
        """The right key: the source's earlier failures are forgiven."""
        self.failures.pop(source, None)

    def tracked(self) -> int:
        """Entries held (both tables), for the memory-bound test."""
        return len(self.failures) + len(self.locked_until)


def _trim(table: OrderedDict[str, V], limit: int) -> None:
    while len(table) > limit:
        table.popitem(last=False)
