"""Threshold compaction off the request path: one task per conversation, bounded concurrency.

A re-schedule while a conversation's task is running is coalesced into one follow-up run (the
follow-up sees the newest messages). Failures are retried with exponential backoff, then logged and
left for the next turn; they never reach a client. Summarizer calls a request's deadline cut are
`track`ed here to finish off the request path (cancelled on close).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from compaction.summarize.redact import redact

Job = Callable[[], Awaitable[None]]
OnError = Callable[[str, int, str], None]  # (conversation_id, attempt, redacted error)


def _ignore(_conversation_id: str, _attempt: int, _error: str) -> None:
    return None


class BackgroundCompactor:
    """Runs per-conversation compaction jobs in the background."""

    def __init__(self, *, concurrency: int = 4, retries: int = 2, backoff_s: float = 0.5,
                 on_error: OnError = _ignore) -> None:
        self._on_error = on_error  # the engine's observer logs it (compaction/ has no logger)
        self._semaphore = asyncio.Semaphore(max(1, concurrency))
        self._retries = retries
        self._backoff_s = backoff_s
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._pending: dict[str, Job] = {}
        self._detached: set[asyncio.Task[str]] = set()
        self.failed = 0
        self.completed = 0

    @property
    def running(self) -> int:
        return sum(1 for t in self._tasks.values() if not t.done())

    def is_running(self, conversation_id: str) -> bool:
        task = self._tasks.get(conversation_id)
        return task is not None and not task.done()

    def schedule(self, conversation_id: str, job: Job) -> bool:
        """Start `job` for the conversation, or coalesce it into one follow-up; True when started."""
        if self.is_running(conversation_id):
            self._pending[conversation_id] = job
            return False
        task = asyncio.create_task(self._run(conversation_id, job))
        self._tasks[conversation_id] = task
        task.add_done_callback(lambda done: self._forget(conversation_id, done))
        return True

    def track(self, task: asyncio.Task[str]) -> None:
        """Hold a summarizer call a request left behind until it ends (its result is not used)."""
        self._detached.add(task)
        task.add_done_callback(self._settle)

    def _settle(self, task: asyncio.Task[str]) -> None:
        self._detached.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a failed call the request already moved past is not news

    @property
    def detached(self) -> int:
        """Summarizer calls left behind by requests and still running."""
        return len(self._detached)

    def _forget(self, conversation_id: str, task: asyncio.Task[None]) -> None:
        """Drop a finished task (only if it is still the conversation's current one)."""
        if self._tasks.get(conversation_id) is task:
            del self._tasks[conversation_id]

    async def _run(self, conversation_id: str, job: Job) -> None:
        next_job: Job | None = job
        while next_job is not None:
            async with self._semaphore:
                await self._attempt(conversation_id, next_job)
            next_job = self._pending.pop(conversation_id, None)

    async def _attempt(self, conversation_id: str, job: Job) -> None:
        for attempt in range(self._retries + 1):
            try:
                await job()
                self.completed += 1
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._on_error(conversation_id, attempt + 1, redact(repr(exc))[:1000])
                if attempt < self._retries:
                    await asyncio.sleep(self._backoff_s * 2**attempt)
        self.failed += 1

    async def drain(self) -> None:
        """Wait until no task is running (follow-ups included)."""
        while any(not t.done() for t in self._tasks.values()):
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel running tasks and wait for them to end."""
        self._pending.clear()
        tasks = [*self._tasks.values(), *self._detached]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
