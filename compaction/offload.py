"""CPU-heavy, store-free work of a compaction pass, run off the engine loop.

A local pass over a large chunk (extracting its anchors, redacting its source text, the extractive
summary, the verifier) is hundreds of milliseconds of CPU: on the engine loop it would stall every
other conversation's request for as long. Large work runs in a worker thread instead, so the loop
serves others meanwhile (the interpreter switches threads every few milliseconds). The work reads
only immutable values (stored messages, texts) and the thread-safe memos; the store stays on the
engine thread. Small work runs inline: a thread hop would cost more than it saves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

OFF_LOOP_MIN_CHARS = 16_384  # about 4k tokens: a few milliseconds of regex work and up
Params = ParamSpec("Params")
Result = TypeVar("Result")


async def off_loop(size: int, fn: Callable[Params, Result], *args: Params.args,
                   **kwargs: Params.kwargs) -> Result:
    """`fn(*args, **kwargs)`, in a worker thread when `size` (characters of text it works on) is
    large enough to stall the loop, else inline."""
    if size < OFF_LOOP_MIN_CHARS:
        return fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)
