"""How long a request may wait on compaction; none waits past its deadline.

A request that must compact synchronously gets one `Deadline` (`compaction.sync_deadline_s`): the LLM
summarizer is called only while time is left, each call bounded by what is left; past it the request
goes on with the local levels (extractive, truncation), which never wait on the network, for at most
`LOCAL_GRACE_S` more: then no new pass starts, and the request is truncated to fit (the store keeps
everything; background steps carry on from the view saved). A long history's local passes are CPU
work too (an imported history's first request). Background steps run without a deadline
(`Deadline.never()`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

Clock = Callable[[], float]
MIN_CALL_S = 0.25  # an LLM call is not started with less than this left: it could not finish
LOCAL_GRACE_S = 1.0  # past the deadline, local passes may still start for this long


@dataclass(frozen=True)
class Deadline:
    """A point on the monotonic clock (None: no deadline)."""

    at: float | None
    clock: Clock = field(default=time.monotonic, compare=False)
    local: bool = False  # chosen, not missed: the LLM levels are not tried (nor reported rejected)

    @classmethod
    def after(cls, seconds: float, clock: Clock = time.monotonic) -> Deadline:
        return cls(clock() + seconds, clock)

    @classmethod
    def local_only(cls, clock: Clock = time.monotonic) -> Deadline:
        """Already passed, by choice: the local levels alone, for at most `LOCAL_GRACE_S`."""
        return cls(clock(), clock, local=True)

    @classmethod
    def never(cls) -> Deadline:
        return cls(None)

    def remaining(self) -> float | None:
        """Seconds left (never negative); None without a deadline."""
        return None if self.at is None else max(0.0, self.at - self.clock())

    @property
    def passed(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0

    @property
    def exhausted(self) -> bool:
        """Whether even the local levels are out of time (the deadline plus `LOCAL_GRACE_S`)."""
        return self.at is not None and self.clock() >= self.at + LOCAL_GRACE_S

    def allows_call(self) -> bool:
        """Whether a network call (an LLM summarizer level) may still start."""
        left = self.remaining()
        return left is None or left >= MIN_CALL_S

    def bound(self, timeout_s: float | None) -> float | None:
        """`timeout_s` capped by the time left."""
        left = self.remaining()
        if left is None:
            return timeout_s
        return left if timeout_s is None else min(left, timeout_s)
