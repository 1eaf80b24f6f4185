"""BackgroundCompactor: coalescing, retry with backoff, drain, bounded concurrency, close.

Jobs are gated on asyncio.Events, so ordering is driven by the test, never by timing.
"""

from __future__ import annotations

import asyncio

import pytest

from compaction.steps.background import BackgroundCompactor


class Gate:
    """A job that records its runs and waits on an event before finishing."""

    def __init__(self, log: list[str], name: str, *, fail_times: int = 0) -> None:
        self.log, self.name, self.fail_times = log, name, fail_times
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.runs = 0

    async def __call__(self) -> None:
        self.runs += 1
        self.log.append(f"start {self.name}")
        self.started.set()
        await self.release.wait()
        if self.runs <= self.fail_times:
            raise RuntimeError(f"{self.name} failed")
        self.log.append(f"end {self.name}")


async def test_reschedules_while_running_coalesce_into_one_follow_up() -> None:
    bg = BackgroundCompactor(backoff_s=0)
    log: list[str] = []
    first, second, third = Gate(log, "a"), Gate(log, "b"), Gate(log, "c")
    assert bg.schedule("conv", first) is True
    await first.started.wait()
    assert bg.schedule("conv", second) is False and bg.schedule("conv", third) is False
    assert bg.is_running("conv")
    first.release.set()
    third.release.set()
    await bg.drain()
    assert log == ["start a", "end a", "start c", "end c"]  # b was superseded by c, not run
    assert second.runs == 0 and bg.completed == 2 and bg.failed == 0 and not bg.is_running("conv")


async def test_failures_retry_with_backoff_then_give_up_without_raising(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(delay: float) -> None:
        sleeps.append(delay)
        await real_sleep(0)

    bg = BackgroundCompactor(retries=2, backoff_s=0.5)
    log: list[str] = []
    job = Gate(log, "x", fail_times=10)
    job.release.set()
    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    bg.schedule("conv", job)
    await bg.drain()
    monkeypatch.undo()
    assert job.runs == 3 and bg.failed == 1 and bg.completed == 0
    assert sleeps == [0.5, 1.0]  # exponential backoff between the three attempts


async def test_a_retry_that_succeeds_counts_as_completed() -> None:
    bg = BackgroundCompactor(retries=2, backoff_s=0)
    job = Gate([], "x", fail_times=1)
    job.release.set()
    bg.schedule("conv", job)
    await bg.drain()
    assert job.runs == 2 and bg.completed == 1 and bg.failed == 0


async def test_concurrency_is_bounded_across_conversations() -> None:
    bg = BackgroundCompactor(concurrency=2, backoff_s=0)
    log: list[str] = []
    jobs = {name: Gate(log, name) for name in ("a", "b", "c")}
    for name, job in jobs.items():
        bg.schedule(name, job)
    await jobs["a"].started.wait()
    await jobs["b"].started.wait()
    for _ in range(5):
        await asyncio.sleep(0)
    assert not jobs["c"].started.is_set() and bg.running == 3  # c waits for a semaphore slot
    jobs["a"].release.set()
    await jobs["c"].started.wait()
    jobs["b"].release.set()
    jobs["c"].release.set()
    await bg.drain()
    assert bg.completed == 3 and bg.running == 0


async def test_drain_waits_for_follow_ups_too() -> None:
    bg = BackgroundCompactor(backoff_s=0)
    log: list[str] = []
    first, follow_up = Gate(log, "a"), Gate(log, "b")
    bg.schedule("conv", first)
    await first.started.wait()
    bg.schedule("conv", follow_up)
    first.release.set()
    follow_up.release.set()
    await bg.drain()
    assert log == ["start a", "end a", "start b", "end b"]


async def test_aclose_cancels_running_and_pending_jobs() -> None:
    bg = BackgroundCompactor(backoff_s=0)
    log: list[str] = []
    running, pending = Gate(log, "a"), Gate(log, "b")
    bg.schedule("conv", running)
    await running.started.wait()
    bg.schedule("conv", pending)
    await bg.aclose()
    assert log == ["start a"] and pending.runs == 0 and bg.running == 0
    assert bg.completed == 0


async def test_finished_tasks_are_not_kept() -> None:
    bg = BackgroundCompactor(backoff_s=0, retries=0)
    log: list[str] = []
    for index in range(20):
        gate = Gate(log, f"j{index}", fail_times=index % 2)
        gate.release.set()
        bg.schedule(f"conv-{index}", gate)
    await bg.drain()
    await asyncio.sleep(0)
    assert bg._tasks == {} and bg.completed == 10 and bg.failed == 10
    await bg.aclose()
