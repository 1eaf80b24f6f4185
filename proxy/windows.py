"""Context windows per requested model, resolved once and cached (litellm metadata is slow to load)."""

from __future__ import annotations

import asyncio

from compaction.budget import resolve_context_window
from config.settings import Settings


class WindowResolver:
    """Caches `compaction.budget.resolve_context_window`; the first lookup runs off the loop."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._cache: dict[str, int] = {}

    async def window(self, model: str) -> int:
        cached = self._cache.get(model)
        if cached is None:
            window, _source = await asyncio.to_thread(resolve_context_window, self._settings, model)
            cached = self._cache[model] = int(window)
        return cached
