"""One memory bound over the process's request-path caches: `server.cache_mib`.

Every bounded in-process cache (the resend memos, the stored-prefix rows, the running hashes, the
translations of the Messages and Responses routes, ...) registers here under a name with its default
bound. `apply(mib)` scales every bound by `mib / DEFAULT_CACHE_MIB` (caches registered later are
scaled as they register), so one setting sizes them all: a server that resumes 50,000-message
sessions raises it until such a history's resend is remembered whole. `fill()` is what /metrics
reports (`ctxproxy_cache_bytes`, `ctxproxy_cache_limit_bytes`, per cache and in total).
"""

from __future__ import annotations

import threading
import weakref
from typing import Protocol, TypeVar

# The caches' default bounds add up to about this (tests/proxy/observability/test_cache_metrics.py).
DEFAULT_CACHE_MIB = 100


class Bounded(Protocol):
    """A cache with a byte estimate of what it holds, its bound, and a bound that can be scaled."""

    @property
    def held_bytes(self) -> int: ...

    @property
    def max_bytes(self) -> int: ...

    def scale(self, factor: float) -> None:
        """Bound = the default bound x `factor` (what is over it goes at the next write)."""


B = TypeVar("B", bound=Bounded)
_caches: weakref.WeakValueDictionary[str, Bounded] = weakref.WeakValueDictionary()
_factor = 1.0
_lock = threading.Lock()


def register(name: str, cache: B) -> B:
    """Report `cache` under `name` (the newest one of a name) and scale it to the current bound."""
    with _lock:
        if _factor != 1.0:
            cache.scale(_factor)
        _caches[name] = cache
    return cache


def apply(mib: int) -> None:
    """Scale every registered cache (and those to come) so that they add up to about `mib`."""
    global _factor
    with _lock:
        _factor = mib / DEFAULT_CACHE_MIB
        for cache in list(_caches.values()):
            cache.scale(_factor)


def fill() -> dict[str, tuple[int, int]]:
    """Cache name -> (bytes held, bound in bytes)."""
    with _lock:
        caches = dict(_caches)
    return {name: (cache.held_bytes, cache.max_bytes) for name, cache in caches.items()}
