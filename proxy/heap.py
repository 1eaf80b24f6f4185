"""Freed heap memory given back to the OS: glibc's malloc_trim, run periodically off the request path.

glibc keeps what a thread frees in that thread's arena for reuse and hands back only the top of a
heap, so transient allocations (request bodies, JSON buffers, query results) leave RSS at the
high-water mark of everything ever in flight at once. `malloc_trim(0)` releases every free page of
every arena. Where the C library is not glibc (musl, macOS) there is nothing to call: a no-op.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from proxy import appkeys


def _glibc_trim() -> Callable[[int], int] | None:
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_TRIM = _glibc_trim()


def available() -> bool:
    return _TRIM is not None


def trim() -> bool:
    """Give free heap pages back to the OS; True when glibc released any."""
    return bool(_TRIM(0)) if _TRIM is not None else False


async def trim_periodically(interval_s: float) -> None:
    """Forever: every `interval_s`, a trim in a worker thread (it locks one arena at a time)."""
    while True:
        await asyncio.sleep(interval_s)
        await asyncio.to_thread(trim)


async def heap_trim_ctx(app: web.Application) -> AsyncIterator[None]:
    """Cleanup context: periodic trims while the app runs (`server.malloc_trim_s`, 0: none)."""
    interval_s = app[appkeys.SETTINGS].server.malloc_trim_s
    task = asyncio.create_task(trim_periodically(interval_s)) if interval_s > 0 and available() else None
    yield
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
