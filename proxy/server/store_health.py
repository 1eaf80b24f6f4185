"""Whether the store takes writes: a full disk or a read-only store is counted, logged in one line
and shown by /readyz until the next write succeeds."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from config.errors import StoreUnwritableError


@dataclass
class StoreHealth:
    """The store's last write failure (None once a write succeeds again)."""

    failing: StoreUnwritableError | None = None
    since: float | None = None

    def failed(self, error: StoreUnwritableError) -> None:
        """A write was refused by the disk or the database: remembered until one succeeds."""
        if self.failing is None:
            self.since = time.time()
        self.failing = error

    def wrote(self) -> None:
        """A write went through: the store has recovered (space freed, made writable)."""
        self.failing, self.since = None, None

    def report(self) -> dict[str, Any]:
        """What /readyz shows of the store's writes."""
        if self.failing is None:
            return {"writable": True}
        return {"writable": False, "code": self.failing.code, "message": self.failing.message,
                "since": self.since}
