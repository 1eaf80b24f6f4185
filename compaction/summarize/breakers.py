"""The summarizer a turn uses: observed, behind one circuit breaker per (tenant, endpoint).

The breaker's policy: it counts transport failures and timeouts, the exceptions that pass
through it, never an answer rejected for its content (escalation.py moves such a summary to the
next level without telling the breaker). Local summarizers cannot fail that way and get no breaker.
"""

from __future__ import annotations

from collections import OrderedDict

from compaction.observer import CompactionObserver, ObservedSummarizer
from compaction.summarize.summarizers import CircuitBreaker
from compaction.types import ChatTurn, Summarizer, SummarizerChoice
from config.settings import LOCAL_EXTRACTIVE, SummarizerSettings

# Breakers kept (least recently used forgotten first): one per (tenant, endpoint), so without a
# bound every new client key would keep a breaker, and the summarizer instance it wraps, forever.
MAX_BREAKERS = 4096
# Observing wrappers of local summarizers, by instance: an engine whose chooser makes a new instance
# per turn (replay's does) would otherwise keep every one of them, each pinned by its wrapper.
MAX_LOCAL_OBSERVED = 64


class SummarizerPool:
    """Breakers and observing wrappers, kept for the engine's lifetime."""

    def __init__(self, settings: SummarizerSettings, observer: CompactionObserver,
                 max_breakers: int = MAX_BREAKERS) -> None:
        self._settings = settings
        self._observer = observer
        self._max_breakers = max_breakers
        self._breakers: OrderedDict[tuple[str, str], ObservedSummarizer] = OrderedDict()
        self._observed: OrderedDict[int, ObservedSummarizer] = OrderedDict()  # local ones, by identity

    def wrap(self, turn: ChatTurn, choice: SummarizerChoice) -> SummarizerChoice:
        """`choice` observed, behind its endpoint's breaker.

        The endpoint is the summarizer's stable identity (model, api_base, key hash), not the
        instance: a re-created instance (e.g. evicted from a cache) keeps its breaker's count.
        """
        if choice.summarizer.name == LOCAL_EXTRACTIVE:
            return SummarizerChoice(self._observe_local(choice.summarizer), choice.settings)
        endpoint = getattr(choice.summarizer, "endpoint", None)
        if not isinstance(endpoint, str):
            endpoint = f"{choice.summarizer.name}|{choice.settings.get('api_base') or ''}"
        key = (turn.tenant_id, endpoint)
        found = self._breakers.get(key)
        breaker = found.inner if found is not None else None
        if found is None or not isinstance(breaker, CircuitBreaker):
            s = self._settings
            found = self._breakers[key] = ObservedSummarizer(
                CircuitBreaker(choice.summarizer, failures=s.breaker_failures, reset_s=s.breaker_reset_s),
                self._observer, circuit="|".join(key))
            while len(self._breakers) > self._max_breakers:
                self._breakers.popitem(last=False)[1].dropped()
        else:
            breaker.inner = choice.summarizer  # same endpoint: the current instance, same count
            self._breakers.move_to_end(key)
        return SummarizerChoice(found, choice.settings)

    def __len__(self) -> int:
        return len(self._breakers)

    def _observe_local(self, summarizer: Summarizer) -> ObservedSummarizer:
        """One observing wrapper per local summarizer instance (no breaker: it cannot fail)."""
        observed = self._observed.get(id(summarizer))
        if observed is None or observed.inner is not summarizer:
            observed = self._observed[id(summarizer)] = ObservedSummarizer(summarizer, self._observer)
            while len(self._observed) > MAX_LOCAL_OBSERVED:
                self._observed.popitem(last=False)  # least recently used
        self._observed.move_to_end(id(summarizer))
        return observed

    @property
    def local_observed(self) -> int:
        """Local summarizers with an observing wrapper kept (at most MAX_LOCAL_OBSERVED)."""
        return len(self._observed)
