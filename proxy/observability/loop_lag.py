"""Event-loop lag: how late a short sleep wakes up, observed into ctxproxy_event_loop_lag_seconds.

Anything that holds the loop (CPU work on a large request, a blocking import) shows up here as lag,
which is the latency every concurrent request, /healthz included, pays on top of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from proxy import appkeys

INTERVAL_S = 0.05


async def watch(observe: Callable[[float], None], interval_s: float = INTERVAL_S) -> None:
    """Forever: sleep `interval_s`, report how much later than asked the loop woke us."""
    loop = asyncio.get_running_loop()
    while True:
        started = loop.time()
        await asyncio.sleep(interval_s)
        observe(max(0.0, loop.time() - started - interval_s))


async def loop_lag_ctx(app: web.Application) -> AsyncIterator[None]:
    """Cleanup context: the watcher runs as long as the app."""
    task = asyncio.create_task(watch(app[appkeys.METRICS].observe_loop_lag))
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
