"""Running hashes over message lists, memoised per (previous hash, the message's exact JSON); bounded.

Every request resends its whole history, so the chain hashes (identity) and the forwarded hashes
(prefix stability) were recomputed over every message each turn: a canonical, key-sorted encoding
and a sha256 per message. A message seen before after the same previous hash has the same running
hash, so it is looked up instead. The key is the message's orjson encoding as received (insertion
order kept): equal bytes mean equal JSON values (a different key order is only a miss). A message
holding anything but dicts, lists, strings, ints, booleans and nulls (a float, say) is not memoised.
Bounded in bytes held (keys, values and the memo's own structures), least recently used first out.
orjson's output is a buffer of at least 4 KiB whatever its length (3.12 on): a key is kept as a
right-sized copy, or a 60-byte message would hold 4 KiB and the bound would understate memory 15-fold.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from store.fastjson import is_plain

Step = Callable[[str, dict[str, Any]], str]  # (previous hash, message) -> this message's running hash
MAX_KEY_BYTES = 8 * 1024 * 1024  # about 14 resent 100k-token histories (500 messages of ~800 bytes)
# Bytes of a memo entry beyond its message's JSON, measured (tests/store/test_running_hashes.py):
# the key tuple 56, the bytes header 33, the 64-hex hash string 113, the ordered dict ~180 (its
# tables are sized for the churn of an LRU: deleted slots linger until the next resize).
_ENTRY_OVERHEAD = 384


def exact_json(message: dict[str, Any]) -> bytes | None:
    """The message's exact JSON (None when it holds a type outside JSON's own)."""
    if not is_plain(message):
        return None
    try:
        return orjson.dumps(message)
    except orjson.JSONEncodeError:
        return None


_NAMED: dict[str, RunningHashes] = {}  # the process's memos, by name (reported by /metrics)


def named() -> dict[str, RunningHashes]:
    """The memos created with a name (one per kind of running hash in the process)."""
    return dict(_NAMED)


class RunningHashes:
    """`over(messages)`: the running hash of each message under `step`, memoised; thread-safe."""

    def __init__(self, step: Step, max_bytes: int = MAX_KEY_BYTES, *, name: str | None = None) -> None:
        if name is not None:
            _NAMED[name] = self
        self._step = step
        self._memo: OrderedDict[tuple[str, bytes], str] = OrderedDict()
        self._bytes = 0
        self._max = max_bytes
        self._lock = threading.Lock()

    def over(self, messages: Sequence[dict[str, Any]], previous: str = "") -> list[str]:
        out: list[str] = []
        missed: list[tuple[tuple[str, bytes], str]] = []
        memo = self._memo
        with self._lock:  # the look-ups, in one go
            keys = [exact_json(m) for m in messages]
            for message, exact in zip(messages, keys, strict=True):
                key = (previous, exact) if exact is not None else None
                found = memo.get(key) if key is not None else None
                if found is None:
                    found = self._step(previous, message)
                    if key is not None:
                        missed.append((key, found))
                else:
                    memo.move_to_end(key)  # type: ignore[arg-type]
                out.append(found)
                previous = found
            for key, value in missed:
                self._remember(key, value)
        return out

    def _remember(self, key: tuple[str, bytes], value: str) -> None:
        if key in self._memo:
            return
        key = (key[0], bytes(memoryview(key[1])))  # right-sized: orjson's buffer is >= 4 KiB
        self._memo[key] = value
        self._bytes += len(key[1]) + _ENTRY_OVERHEAD
        while self._bytes > self._max and self._memo:
            (_, old), _ = self._memo.popitem(last=False)
            self._bytes -= len(old) + _ENTRY_OVERHEAD

    @property
    def held_bytes(self) -> int:
        return self._bytes

    @property
    def max_bytes(self) -> int:
        return self._max

    def __len__(self) -> int:
        return len(self._memo)
