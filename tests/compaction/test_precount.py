"""A large request is tokenised in a worker thread before ingest; a small one is counted as stored."""

from __future__ import annotations

import threading
from typing import Any

from compaction.engine import PRECOUNT_MESSAGES, precounted
from compaction.tokens import TokenCounter


class ThreadNotingCounter(TokenCounter):
    """Counts characters and notes the thread of every message counted."""

    def __init__(self) -> None:
        super().__init__("chars", len)
        self.threads: list[threading.Thread] = []

    def count_message(self, message: Any) -> int:
        self.threads.append(threading.current_thread())
        return super().count_message(message)


def messages(n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"message {i}", "pinned": i == 0} for i in range(n)]


async def test_large_request_is_counted_off_the_loop_with_the_same_counts() -> None:
    counter, batch = ThreadNotingCounter(), messages(PRECOUNT_MESSAGES)
    count = await precounted(counter, batch)
    assert counter.threads and all(t is not threading.main_thread() for t in counter.threads)
    plain = TokenCounter("chars", len)
    expected = [plain.count_message({k: v for k, v in m.items() if k != "pinned"}) for m in batch[:50]]
    assert [count(m) for m in batch[:50]] == expected
    assert len(counter.threads) == len(batch)  # looked up, not counted again


async def test_small_request_is_counted_when_stored() -> None:
    counter, batch = ThreadNotingCounter(), messages(10)
    count = await precounted(counter, batch)
    assert counter.threads == []
    assert count(batch[3]) > 0 and counter.threads == [threading.main_thread()]
