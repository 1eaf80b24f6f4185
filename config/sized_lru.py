"""A least-recently-used map bounded by the summed size of its values: the request-path memos' store."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from config import cache_budget

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SizedLru(Generic[K, V]):
    """Values with the size each was put with (records, slots, bytes: the caller's unit), at most
    `max_size` in all; the least recently used go first, and a value over the bound is not kept.
    Thread-safe."""

    def __init__(self, max_size: int, *, name: str | None = None, unit_bytes: int = 1) -> None:
        """`name`: reported on /metrics and sized by `server.cache_mib` (config/cache_budget.py);
        `unit_bytes`: what one unit of size costs in memory, about (1 for a size in bytes)."""
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._held = 0
        self.max_size = self.default_size = max_size
        self.unit_bytes = unit_bytes
        self._lock = threading.Lock()
        if name is not None:
            cache_budget.register(name, self)

    def get(self, key: K) -> V | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def fits(self, size: int) -> bool:
        """Whether a value of `size` would be kept (a caller skips building one that would not)."""
        return size <= self.max_size

    def put(self, key: K, value: V, size: int) -> None:
        """Keep `value` under `key` (replacing what was there), then drop the oldest over the bound."""
        with self._lock:
            old = self._items.pop(key, None)
            self._held -= old[1] if old is not None else 0
            if size > self.max_size:
                return
            self._items[key] = (value, size)
            self._held += size
            self._drop_over_bound()

    def scale(self, factor: float) -> None:
        """The bound set to the default bound x `factor`; the oldest values over it go now."""
        with self._lock:
            self.max_size = max(1, int(self.default_size * factor))
            self._drop_over_bound()

    def _drop_over_bound(self) -> None:
        """The least recently used values, until what is held fits the bound (lock held)."""
        while self._held > self.max_size:
            _, (_, dropped) = self._items.popitem(last=False)
            self._held -= dropped

    @property
    def held_bytes(self) -> int:
        return self._held * self.unit_bytes

    @property
    def max_bytes(self) -> int:
        return self.max_size * self.unit_bytes

    def discard(self, key: K) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            self._held -= old[1] if old is not None else 0

    def discard_where(self, drop: Callable[[V], bool]) -> None:
        """Drop every value `drop` picks (a scan: for rare events)."""
        with self._lock:
            for key in [k for k, (v, _) in self._items.items() if drop(v)]:
                self._held -= self._items.pop(key)[1]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._held = 0

    @property
    def held(self) -> int:
        """The summed size of the values kept."""
        return self._held

    def __len__(self) -> int:
        return len(self._items)
