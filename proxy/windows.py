"""Context windows per requested model, resolved once and cached (litellm metadata is slow to load).

Model names come from clients, and a wildcard entry accepts any of them, so the cache is a bounded
LRU: a client cycling through made-up names costs lookups, never unbounded memory.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable

from compaction import WindowSource, resolve_context_window
from config.settings import Settings

MAX_CACHED_MODELS = 1024
Resolve = Callable[[Settings, str], tuple[int, WindowSource]]


class WindowResolver:
    """Caches `compaction.view.budget.resolve_context_window` (LRU, `max_size` names); the first lookup
    of a name runs off the loop."""

    def __init__(self, settings: Settings, max_size: int = MAX_CACHED_MODELS,
                 resolve: Resolve = resolve_context_window) -> None:
        self._settings = settings
        self._max_size = max_size
        self._resolve = resolve
        self._cache: OrderedDict[str, int] = OrderedDict()

    async def window(self, model: str) -> int:
        cached = self._cache.get(model)
        if cached is not None:
            self._cache.move_to_end(model)
            return cached
        window, _source = await asyncio.to_thread(self._resolve, self._settings, model)
        self._cache[model] = int(window)
        while len(self._cache) > self._max_size:
            self._cache.popitem(last=False)  # least recently used
        return int(window)

    def __len__(self) -> int:
        return len(self._cache)
