"""Settings as frozen, validated dataclasses.

The YAML shape is LiteLLM-compatible (`model_list` with `litellm_params`) plus ctxproxy's own
sections. Every knob has a default so `make serve` runs with no file at all. Loading and environment
overrides live in config/loader.py; this module only declares the shape and its invariants.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from config.cache_budget import DEFAULT_CACHE_MIB
from config.errors import ConfigError

# Compaction defaults: tuned constants, overridable but named here.
FRESH_TAIL_COUNT = 32
LEAF_MIN_FANOUT = 8
LEAF_CHUNK_TOKENS = 20_000
LEAF_TARGET_TOKENS = 1_200
CONDENSED_MIN_FANOUT = 4
CONDENSED_TARGET_TOKENS = 2_000
CONTEXT_THRESHOLD_PERCENT = 60
SUMMARIZE_MESSAGE_THRESHOLD = 20
MAX_RECOVERY_ITERATIONS = 20
# A step breaks the provider's prompt cache, so it goes deep: it lands at this share of the budget
# (raw messages filling it) and the next many requests only append (bench/cost_eval.py, 40 against
# 90: 11 steps per 100 requests instead of 30, billed input 0.41x, facts kept alike; docs/results.md).
# 35/20/25 against 40/25/30 on the real sessions, with steps finished by the local levels when
# prepared summaries run out: billed input 0.92x, 9.4 steps per 100 requests instead of 11.0.
# Background work prepares summaries ahead, down to the preparation share, and the fresh tail a
# step keeps raw is at most FRESH_TAIL_MAX_PERCENT of the budget; the request path waits at most
# SYNC_DEADLINE_S.
TARGET_TOKEN_PERCENT = 35
PREPARE_TOKEN_PERCENT = 20
FRESH_TAIL_MAX_PERCENT = 25
SYNC_DEADLINE_S = 10.0
OversizedLastMessage = Literal["reject", "truncate"]
OVERSIZED_LAST_MESSAGE_POLICIES: tuple[OversizedLastMessage, ...] = ("reject", "truncate")
# The window assumed when neither config nor provider metadata knows it.
FALLBACK_CONTEXT_WINDOW = 50_000

LOCAL_EXTRACTIVE = "local/extractive"
OPENAI_API_BASE = "https://api.openai.com/v1"
# Providers spoken to directly over OpenAI's wire format (the proxy's fast path, no litellm).
OPENAI_WIRE_PROVIDERS = frozenset({"", "openai", "hosted_vllm", "openai_compatible", "openai-compatible",
                                   "custom_openai"})
# The litellm params the fast path applies, as HTTP: headers, the OpenAI-Organization header, the
# read timeouts, and OpenAI body parameters (set in the forwarded body, over the client's value, as
# litellm does). Any other param on a fast-path entry is a config error (it would be ignored).
FAST_PATH_BODY_PARAMS = frozenset({"temperature", "top_p", "max_tokens", "max_completion_tokens", "seed",
                                   "stop", "n", "presence_penalty", "frequency_penalty",
                                   "reasoning_effort"})
FAST_PATH_PARAMS = FAST_PATH_BODY_PARAMS | {"extra_headers", "headers", "organization", "timeout",
                                            "stream_timeout"}


@dataclass(frozen=True)
class CompactionSettings:
    """Budget and compaction policy; global defaults, overridable per model."""

    enabled: bool = True
    context_window: int | None = None  # None: model entry, then provider metadata, then fallback
    summarize_token_percent: int = CONTEXT_THRESHOLD_PERCENT  # of the input budget: prepare above it
    target_token_percent: int = TARGET_TOKEN_PERCENT  # a step lands here; raw messages fill the rest
    prepare_token_percent: int = PREPARE_TOKEN_PERCENT  # background summaries prepared down to here
    summarize_message_threshold: int = SUMMARIZE_MESSAGE_THRESHOLD
    reserve_tokens: int = 4_096  # reply reserve when the request sets no max_tokens (<= window/4)
    safety_margin_tokens: int = 256
    fresh_tail_count: int = FRESH_TAIL_COUNT
    # of the budget; the newest group and last user message are kept regardless
    fresh_tail_max_percent: int = FRESH_TAIL_MAX_PERCENT
    anchor_max_percent: int = 15  # bounded share of the budget for the anchor block
    leaf_min_fanout: int = LEAF_MIN_FANOUT
    leaf_chunk_tokens: int = LEAF_CHUNK_TOKENS
    leaf_target_tokens: int = LEAF_TARGET_TOKENS
    condensed_min_fanout: int = CONDENSED_MIN_FANOUT
    condensed_target_tokens: int = CONDENSED_TARGET_TOKENS
    max_recovery_iterations: int = MAX_RECOVERY_ITERATIONS
    background: bool = True  # threshold compaction after the turn, off the request path
    sync_deadline_s: float = SYNC_DEADLINE_S  # request-path compaction: local levels past this
    oversized_last_message: OversizedLastMessage = "reject"  # reject (400 context_length_exceeded) | truncate

    def validate(self, where: str) -> None:
        """Raise ConfigError naming the first bad key."""
        for name in ("summarize_token_percent", "target_token_percent", "prepare_token_percent",
                     "fresh_tail_max_percent", "anchor_max_percent"):
            value = getattr(self, name)
            if not 0 < value <= 100:
                raise ConfigError(f"{where}.{name}: must be between 1 and 100, got {value}")
        if self.prepare_token_percent >= self.target_token_percent:
            raise ConfigError(f"{where}.prepare_token_percent: must be below target_token_percent "
                              f"({self.prepare_token_percent} >= {self.target_token_percent})")
        if not 0 < self.sync_deadline_s <= 3_600:
            raise ConfigError(f"{where}.sync_deadline_s: must be between 0 and 3600 seconds, "
                              f"got {self.sync_deadline_s}")
        if self.oversized_last_message not in OVERSIZED_LAST_MESSAGE_POLICIES:
            raise ConfigError(f"{where}.oversized_last_message: must be one of "
                              f"{', '.join(OVERSIZED_LAST_MESSAGE_POLICIES)}, "
                              f"got {self.oversized_last_message!r}")
        for name in ("summarize_message_threshold", "reserve_tokens", "safety_margin_tokens",
                     "fresh_tail_count", "leaf_min_fanout", "leaf_chunk_tokens", "leaf_target_tokens",
                     "condensed_min_fanout", "condensed_target_tokens", "max_recovery_iterations"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{where}.{name}: must be >= 0, got {getattr(self, name)}")
        if self.context_window is not None and self.context_window < 1_024:
            raise ConfigError(f"{where}.context_window: must be at least 1024 tokens, "
                              f"got {self.context_window}")
        if self.condensed_min_fanout < 2:
            raise ConfigError(f"{where}.condensed_min_fanout: must be >= 2")


@dataclass(frozen=True)
class LiteLLMParams:
    """Where a model really lives. `api_key=None` forwards the client's own key."""

    model: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)  # secrets never appear in reprs/tracebacks
    extra: dict[str, Any] = field(default_factory=dict)  # other litellm params, passed through

    @property
    def provider(self) -> str:
        """`openai` for `openai/gpt-4o`, the litellm provider prefix otherwise ("" when none)."""
        return self.model.split("/", 1)[0] if "/" in self.model else ""

    @property
    def uses_openai_wire(self) -> bool:
        """True when the fast path applies (OpenAI wire format and a known base URL)."""
        if self.provider not in OPENAI_WIRE_PROVIDERS:
            return False
        return self.api_base is not None or self.provider in ("", "openai")

    @property
    def uses_anthropic_wire(self) -> bool:
        """True for `anthropic/...` entries: /v1/messages goes to them natively over HTTP."""
        return self.provider == "anthropic"

    @property
    def upstream_model(self) -> str:
        """The model name the provider expects (prefix stripped)."""
        return self.model.split("/", 1)[1] if "/" in self.model else self.model


@dataclass(frozen=True)
class ModelEntry:
    """One `model_list` entry; `model_name` may be `*` (or end in `*`) as a wildcard."""

    model_name: str
    litellm_params: LiteLLMParams
    context_window: int | None = None
    compaction: CompactionSettings = field(default_factory=CompactionSettings)

    def matches(self, requested: str) -> bool:
        if self.model_name.endswith("*"):
            return requested.startswith(self.model_name[:-1])
        return requested == self.model_name

    def resolved_params(self, requested: str) -> LiteLLMParams:
        """Fill a wildcard upstream (`openai/*`) with the requested model name."""
        params = self.litellm_params
        if params.model.endswith("*"):
            prefix = params.model[:-1]
            return LiteLLMParams(prefix + requested, params.api_base, params.api_key, params.extra)
        return params


@dataclass(frozen=True)
class SummarizerSettings:
    """Optional separate summarizer; `model=None` means the request's own model and upstream."""

    model: str | None = None
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 60.0
    temperature: float = 0.0
    breaker_failures: int = 5  # consecutive failures that open the circuit
    breaker_reset_s: float = 60.0  # how long the circuit stays open before one trial call
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StoreSettings:
    path: str = "./data/ctxproxy.db"
    url: str | None = field(default=None, repr=False)  # postgresql://...: shared store; None: SQLite
    lease_s: float = 120.0  # a background compaction step's claim; another replica may take it after this
    busy_timeout_ms: int = 5_000
    tenant_secret: str | None = field(default=None, repr=False)  # None: generated once, kept in meta
    retention_days: float | None = None  # conversations idle longer are deleted; None: kept forever
    # SQLite memory per connection, both bounded: the page cache (heap) and the memory map of the
    # file (0: off, reads go through the kernel's page cache, outside the process's RSS).
    cache_mib: int = 2
    mmap_mib: int = 0


@dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8080
    max_body_bytes: int = 32 * 1024 * 1024
    upstream_timeout_s: float = 600.0
    upstream_connect_timeout_s: float = 10.0
    admin_key: str | None = field(default=None, repr=False)  # protects /ui and the operator API; None: off
    require_client_key: bool = False  # True: keyless requests get 401 (proxy/server/auth.py)
    trusted_proxies: tuple[str, ...] = ()  # addresses/CIDRs whose X-Forwarded-For is believed
    log_level: str = "info"
    log_format: str = "json"  # json | console
    malloc_trim_s: float = 10.0  # free heap pages given back to the OS this often (glibc); 0: never
    header_timeout_s: float = 10.0  # a request's head must arrive within this (else 408, closed)
    body_timeout_s: float = 30.0  # longest wait for the next part of a body (else 408, closed)
    min_body_bytes_per_s: int = 1_024  # a body may take body_timeout_s plus its size at this rate
    max_connections: int = 1_024  # open client connections; more are answered 503 and closed
    cache_mib: int = DEFAULT_CACHE_MIB  # one bound over the request-path caches (config/cache_budget.py)
    engine_threads: int = 2  # engines on their own threads: one conversation's work never holds up another's


@dataclass(frozen=True)
class RecallSettings:
    """The search/expand tools the proxy offers to the model when summaries are in its context."""

    enabled: bool = True
    search_tool_name: str = "context_search"
    expand_tool_name: str = "context_expand"
    max_rounds: int = 3
    search_limit: int = 10


@dataclass(frozen=True)
class Settings:
    model_list: tuple[ModelEntry, ...]
    compaction: CompactionSettings = field(default_factory=CompactionSettings)
    summarizer: SummarizerSettings = field(default_factory=SummarizerSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    recall: RecallSettings = field(default_factory=RecallSettings)

    def find_model(self, requested: str) -> ModelEntry | None:
        """Exact names win over wildcards; None when nothing matches."""
        exact = [m for m in self.model_list if m.model_name == requested]
        if exact:
            return exact[0]
        wild = [m for m in self.model_list if m.matches(requested)]
        return max(wild, key=lambda m: len(m.model_name)) if wild else None


def default_model_list() -> tuple[ModelEntry, ...]:
    """No config file: every model goes to OpenAI with the client's own key."""
    return (ModelEntry("*", LiteLLMParams("openai/*", OPENAI_API_BASE)),)
