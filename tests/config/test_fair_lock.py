"""config/fair_lock.py: reentrant, and a release hands the lock to the thread that waited first."""

from __future__ import annotations

import threading

import pytest

from config.fair_lock import FairRLock


def test_reentrant_within_one_thread() -> None:
    lock = FairRLock()
    with lock, lock:
        pass
    with lock:  # released whole: free again
        pass


def test_a_waiting_thread_gets_the_lock_before_the_releaser_gets_it_back() -> None:
    lock, order = FairRLock(), []
    waiting = threading.Event()
    lock.acquire()

    def other() -> None:
        waiting.set()
        with lock:
            order.append("other")

    thread = threading.Thread(target=other)
    thread.start()
    waiting.wait(5)
    while not lock._waiting:  # the other thread is queued
        threading.Event().wait(0.001)
    lock.release()
    with lock:  # asked again at once, still holding the GIL: the waiter goes first
        order.append("releaser")
    thread.join(5)
    assert order == ["other", "releaser"]


def test_only_the_owner_may_release() -> None:
    lock = FairRLock()
    with pytest.raises(RuntimeError):
        lock.release()
    lock.acquire()
    failures = []
    thread = threading.Thread(target=lambda: failures.append(pytest.raises(RuntimeError, lock.release)))
    thread.start()
    thread.join(5)
    lock.release()
    assert len(failures) == 1
