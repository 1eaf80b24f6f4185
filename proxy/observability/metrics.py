"""Prometheus metrics on a per-app CollectorRegistry (never the global default).

Names carry units and counters end in `_total`. No label ever holds a conversation or tenant id
(unbounded cardinality, and tenant ids are per-customer data). Owners of events call the methods
here (`observe_compaction`, `observe_summarizer`, `recall_call`, ...) instead of touching metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from store.models import CompactionEvent

METRIC_NAMES = (
    "ctxproxy_requests_total",
    "ctxproxy_upstream_latency_seconds",
    "ctxproxy_proxy_overhead_seconds",
    "ctxproxy_tokens_received_total",
    "ctxproxy_tokens_forwarded_total",
    "ctxproxy_tokens_saved_total",
    "ctxproxy_forwarded_prefix_tokens_total",
    "ctxproxy_billed_input_tokens_estimate_total",
    "ctxproxy_full_history_billed_input_tokens_estimate_total",
    "ctxproxy_provider_cache_read_tokens_total",
    "ctxproxy_compactions_total",
    "ctxproxy_summarizer_latency_seconds",
    "ctxproxy_summarizer_errors_total",
    "ctxproxy_summarizer_circuit_state",
    "ctxproxy_verification_rejections_total",
    "ctxproxy_anchors_extracted_total",
    "ctxproxy_forced_truncations_total",
    "ctxproxy_budget_unused_ratio",
    "ctxproxy_recall_calls_total",
    "ctxproxy_prefix_stable_requests_total",
    "ctxproxy_prefix_checked_requests_total",
    "ctxproxy_reply_store_failures_total",
    "ctxproxy_early_forwards_total",
    "ctxproxy_early_forward_mismatches_total",
    "ctxproxy_resent_body_parses_total",
    "ctxproxy_store_unwritable_total",
    "ctxproxy_store_size_bytes",
    "ctxproxy_event_loop_lag_seconds",
    "ctxproxy_cache_bytes",
    "ctxproxy_cache_limit_bytes",
)
CacheFill = Callable[[], Mapping[str, tuple[int, int]]]  # cache name -> (bytes held, bound in bytes)
CIRCUIT_STATES = {"closed": 0, "half-open": 1, "half_open": 1, "open": 2}
_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_UNUSED_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1)
_OVERHEAD_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5)


def _c(name: str, doc: str, reg: CollectorRegistry, labels: tuple[str, ...] = ()) -> Counter:
    # prometheus_client appends `_total` itself; declare the base name.
    return Counter(name.removesuffix("_total"), doc, labels, registry=reg)


class _Caches(Collector):
    """The bounded in-process caches, read when /metrics is scraped: bytes held and their bound."""

    def __init__(self, fill: CacheFill) -> None:
        self._fill = fill

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return self._families({})

    def collect(self) -> Iterator[GaugeMetricFamily]:
        return self._families(self._fill())

    @staticmethod
    def _families(fill: Mapping[str, tuple[int, int]]) -> Iterator[GaugeMetricFamily]:
        held = GaugeMetricFamily("ctxproxy_cache_bytes", "Bytes an in-process cache holds (estimated)",
                                 labels=["cache"])
        bound = GaugeMetricFamily("ctxproxy_cache_limit_bytes", "The bound of an in-process cache, in bytes",
                                  labels=["cache"])
        for name, (used, limit) in sorted(fill.items()):
            held.add_metric([name], used)
            bound.add_metric([name], limit)
        yield held
        yield bound


class Metrics:
    """All ctxproxy metrics, created on `registry` (one per app, so tests never collide)."""

    def __init__(self, registry: CollectorRegistry | None = None,
                 store_size: Callable[[], float] | None = None, caches: CacheFill | None = None) -> None:
        reg = registry if registry is not None else CollectorRegistry()
        self.registry = reg
        self.requests = _c("ctxproxy_requests_total", "HTTP requests by route and status", reg,
                           ("route", "status"))
        self.upstream_latency = Histogram("ctxproxy_upstream_latency_seconds",
                                          "Upstream time to full reply (stream: to last byte)",
                                          registry=reg, buckets=_LATENCY_BUCKETS)
        self.overhead = Histogram("ctxproxy_proxy_overhead_seconds",
                                  "Time spent in the proxy per request, upstream excluded",
                                  registry=reg, buckets=_OVERHEAD_BUCKETS)
        self.tokens_received = _c("ctxproxy_tokens_received_total", "Tokens in client requests", reg)
        self.tokens_forwarded = _c("ctxproxy_tokens_forwarded_total", "Tokens forwarded upstream", reg)
        self.tokens_saved = _c("ctxproxy_tokens_saved_total", "Received minus forwarded tokens", reg)
        self.prefix_tokens = _c("ctxproxy_forwarded_prefix_tokens_total",
                                "Tokens of leading messages shared with the previous forwarded request "
                                "of the same chat", reg)
        self.billed_estimate = _c("ctxproxy_billed_input_tokens_estimate_total",
                                  "Estimated billed input tokens of forwarded requests "
                                  "(uncached-price equivalents, cached prefix discounted)", reg)
        self.full_billed_estimate = _c("ctxproxy_full_history_billed_input_tokens_estimate_total",
                                       "Estimated billed input tokens had the whole received history "
                                       "been forwarded", reg)
        self.cache_read_tokens = _c("ctxproxy_provider_cache_read_tokens_total",
                                    "Prompt tokens the provider reports read from its cache", reg)
        self.compactions = _c("ctxproxy_compactions_total", "Compaction events: passes and truncations", reg,
                              ("tier", "level", "outcome"))
        self.summarizer_latency = Histogram("ctxproxy_summarizer_latency_seconds",
                                            "Summarizer call duration", registry=reg,
                                            buckets=_LATENCY_BUCKETS)
        self.summarizer_errors = _c("ctxproxy_summarizer_errors_total", "Failed summarizer calls", reg)
        self.circuit_state = Gauge("ctxproxy_summarizer_circuit_state",
                                   "Worst summarizer circuit among the breakers kept: 0 closed, "
                                   "1 half-open, 2 open", registry=reg)
        self._circuits: dict[str, int] = {}  # circuits not closed: their state's level
        self.verification_rejections = _c("ctxproxy_verification_rejections_total",
                                          "Summaries rejected by the fact verifier", reg)
        self.anchors_extracted = _c("ctxproxy_anchors_extracted_total", "Anchors added", reg)
        self.forced_truncations = _c("ctxproxy_forced_truncations_total",
                                     "Requests that needed deterministic truncation", reg)
        self.budget_unused = Histogram("ctxproxy_budget_unused_ratio",
                                       "Share of the input budget a forwarded request leaves unused",
                                       registry=reg, buckets=_UNUSED_BUCKETS)
        self.recall_calls = _c("ctxproxy_recall_calls_total",
                               "Recall operations answered (via: tool_loop or http)", reg,
                               ("operation", "via"))
        self.prefix_stable = _c("ctxproxy_prefix_stable_requests_total",
                                "Forwarded requests extending the previous one (cache-friendly)", reg)
        self.prefix_checked = _c("ctxproxy_prefix_checked_requests_total",
                                 "Forwarded requests with a previous one to compare against", reg)
        self.reply_store_failures = _c("ctxproxy_reply_store_failures_total",
                                       "Replies relayed to the client that could not be stored", reg)
        self.store_unwritable = _c("ctxproxy_store_unwritable_total",
                                   "Store writes refused by a full disk or a read-only store "
                                   "(reason: full or read_only)", reg, ("reason",))
        self.early_forwards = _c("ctxproxy_early_forwards_total",
                                 "Requests forwarded before their bookkeeping (passthrough resends)", reg)
        self.early_mismatches = _c("ctxproxy_early_forward_mismatches_total",
                                   "Early-forwarded requests their full preparation disagreed with", reg)
        self.resent_body_parses = _c("ctxproxy_resent_body_parses_total",
                                     "Chat bodies parsed only past the messages a held body shares", reg)
        self.loop_lag = Histogram("ctxproxy_event_loop_lag_seconds",
                                  "How late the event loop woke a 50 ms sleep (time it was held)",
                                  registry=reg, buckets=_OVERHEAD_BUCKETS)
        self.store_size = Gauge("ctxproxy_store_size_bytes", "store size on disk (SQLite: db + WAL)",
                                registry=reg)
        self.store_size.set_function(store_size or (lambda: 0.0))
        reg.register(_Caches(caches or dict))

    def observe_request(self, route: str, status: int) -> None:
        self.requests.labels(route=route, status=str(status)).inc()

    def observe_loop_lag(self, seconds: float) -> None:
        self.loop_lag.observe(seconds)

    def observe_upstream_latency(self, seconds: float) -> None:
        self.upstream_latency.observe(seconds)

    def observe_overhead(self, seconds: float) -> None:
        self.overhead.observe(seconds)

    def observe_prepared(self, prepared: Any, early: bool = False) -> None:
        """Token, unused-budget, prefix-stability and forced-truncation figures of one PreparedRequest
        (`early`: handed over before its bookkeeping, compaction/resend/early_forward.py).

        Its compaction events are counted by the engine's observer (proxy/observability/observer.py), like
        background ones, so they are not counted here again.
        """
        if early:
            self.early_forwards.inc()
        received, forwarded = prepared.tokens_received, prepared.tokens_forwarded
        self.tokens_received.inc(received)
        self.tokens_forwarded.inc(forwarded)
        self.tokens_saved.inc(max(0, received - forwarded))
        self.budget_unused.observe(prepared.budget_unused_ratio)
        if prepared.forced_truncation:
            self.forced_truncations.inc()
        if prepared.prefix_stable is not None:
            self.prefix_checked.inc()
            if prepared.prefix_stable:
                self.prefix_stable.inc()

    def observe_cost(self, prepared: Any) -> None:
        """The recorded request's shared prefix and billed-input estimates (it and the full history)."""
        self.prefix_tokens.inc(prepared.prefix_tokens)
        self.billed_estimate.inc(prepared.billed_input_estimate)
        self.full_billed_estimate.inc(prepared.full_history_billed_estimate)

    def observe_cache_read(self, tokens: int) -> None:
        """Prompt tokens one reply's usage reports read from the provider's cache."""
        self.cache_read_tokens.inc(tokens)

    def observe_compaction(self, event: CompactionEvent) -> None:
        """One compaction event: a pass (in a request's step or a background one) or a truncation."""
        self.compactions.labels(tier=event.tier, level=event.level, outcome=event.outcome).inc()
        if event.anchors_added:
            self.anchors_extracted.inc(len(event.anchors_added))

    def observe_summarizer(self, seconds: float, ok: bool) -> None:
        self.summarizer_latency.observe(seconds)
        if not ok:
            self.summarizer_errors.inc()

    def observe_level_rejected(self, reason: str) -> None:
        """An escalation level's output was not committed; the verifier's rejections are counted."""
        if reason == "unverified":
            self.verification_rejections.inc()

    def set_circuit_state(self, state: str, circuit: str = "") -> None:
        """`closed`, `half-open`/`half_open` or `open` of one summarizer circuit (a breaker); the gauge
        shows the worst. Only circuits not closed are kept: a dropped breaker reports closed."""
        level = CIRCUIT_STATES[state]
        if level:
            self._circuits[circuit] = level
        else:
            self._circuits.pop(circuit, None)
        self.circuit_state.set(max(self._circuits.values(), default=0))

    def recall_call(self, operation: str, via: str) -> None:
        """One search or expand answered, by the tool loop (`tool_loop`) or the HTTP API (`http`)."""
        self.recall_calls.labels(operation=operation, via=via).inc()

    def reply_store_failed(self) -> None:
        """A reply the client got but the store did not (it is ingested from the next request)."""
        self.reply_store_failures.inc()

    def store_refused_write(self, reason: str) -> None:
        """A store write refused: `full` (no space left) or `read_only`."""
        self.store_unwritable.labels(reason=reason).inc()

    def render(self) -> bytes:
        """Prometheus text exposition of this registry."""
        return bytes(generate_latest(self.registry))
