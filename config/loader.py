"""Load Settings from a YAML file plus `CTXPROXY_*` environment overrides.

Strict on purpose: an unknown key or a wrong type is a ConfigError naming the key path
(`model_list[1].litellm_params.modle: unknown key`), because a silently ignored typo in a proxy
config means traffic going somewhere unintended. `os.environ/NAME` values (LiteLLM's convention)
are read from the environment at load time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import ipaddress
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from config.errors import ConfigError
from config.settings import (
    FAST_PATH_PARAMS,
    CompactionSettings,
    LiteLLMParams,
    ModelEntry,
    RecallSettings,
    ServerSettings,
    Settings,
    StoreSettings,
    SummarizerSettings,
    default_model_list,
)

ENV_PREFIX = "CTXPROXY_"
ENV_CONFIG = "CTXPROXY_CONFIG"
ENV_REF = "os.environ/"
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")

SECTIONS: dict[str, type[Any]] = {
    "compaction": CompactionSettings,
    "summarizer": SummarizerSettings,
    "store": StoreSettings,
    "server": ServerSettings,
    "recall": RecallSettings,
}
MODEL_ENTRY_KEYS = ("model_name", "litellm_params", "context_window", "compaction", "model_info")
# litellm params passed through in `extra`. The full litellm list is long (cost tables, cloud
# credentials); common names are listed, and whole families are admitted by prefix.
KNOWN_LITELLM_PARAMS = frozenset({
    "model", "api_base", "api_key", "api_version", "organization", "custom_llm_provider",
    "timeout", "stream_timeout", "max_retries", "rpm", "tpm", "drop_params", "region_name",
    "temperature", "max_tokens", "max_completion_tokens", "top_p", "seed", "stop", "n",
    "presence_penalty", "frequency_penalty", "reasoning_effort", "extra_headers", "headers",
    "extra_body", "base_model", "tags", "merge_reasoning_content_in_choices", "use_in_pass_through",
    "litellm_credential_name", "input_cost_per_token", "output_cost_per_token", "mock_response",
    "tenant_id", "client_id", "client_secret", "configurable_clientside_auth_params",
    "use_litellm_proxy", "use_chat_completions_api", "keepalive_seconds", "deployment_id",
})
KNOWN_LITELLM_PREFIXES = ("aws_", "vertex_", "azure_", "anthropic_", "watsonx_", "s3_",
                          "input_cost_per_", "output_cost_per_", "cache_", "bedrock_")
_NOTHING = object()


def load_settings(path: str | None, env: Mapping[str, str]) -> Settings:
    """Settings from `path` (or `$CTXPROXY_CONFIG`, or defaults) with env overrides applied."""
    path = path or env.get(ENV_CONFIG) or None
    raw = _read_yaml(path) if path else {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {_tname(raw)}")
    unknown = set(raw) - {"model_list", *SECTIONS}
    if unknown:
        raise ConfigError(_unknown_msg(sorted(unknown)[0], "", ["model_list", *SECTIONS]))
    return _build(_resolve_env_refs(raw, "", env), env)


def _build(raw: dict[str, Any], env: Mapping[str, str]) -> Settings:
    compaction = _build_section("compaction", raw.get("compaction"), env)
    models = _build_model_list(raw.get("model_list"), compaction)  # errors in file order
    sections = {name: _build_section(name, raw.get(name), env) for name in SECTIONS
                if name != "compaction"}
    settings = Settings(model_list=models, compaction=compaction, **sections)
    _validate(settings)
    return settings


def documented_keys() -> list[str]:
    """Every configuration key path the loader accepts (docs/configuration.md documents each one)."""
    keys = ["model_list[].model_name", "model_list[].litellm_params.model",
            "model_list[].litellm_params.api_base", "model_list[].litellm_params.api_key",
            "model_list[].context_window", "model_list[].model_info"]
    keys += [f"model_list[].compaction.{f.name}" for f in dataclasses.fields(CompactionSettings)]
    for name, cls in SECTIONS.items():
        keys += [f"{name}.{f.name}" for f in dataclasses.fields(cls)]
    return keys


def env_override_names() -> list[str]:
    """Every `CTXPROXY_<SECTION>__<KEY>` variable the loader reads."""
    return [f"{ENV_PREFIX}{s.upper()}__{f.name.upper()}"
            for s, cls in SECTIONS.items() for f in dataclasses.fields(cls) if f.name != "extra"]


def compaction_with(assignments: str, base: CompactionSettings | None = None) -> CompactionSettings:
    """`base` (default: the built-in settings) with `key=value,...` applied, each value parsed as its
    environment override would be, the result validated (bench/cost_eval.py `--set`)."""
    env = {}
    for item in filter(None, (part.strip() for part in assignments.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"{item!r}: expected key=value")
        if key.strip() not in {f.name for f in dataclasses.fields(CompactionSettings)}:
            raise ConfigError(_unknown_msg(key.strip(), "compaction",
                                           [f.name for f in dataclasses.fields(CompactionSettings)]))
        env[f"{ENV_PREFIX}COMPACTION__{key.strip().upper()}"] = value
    settings = dataclasses.replace(base or CompactionSettings(),
                                   **_env_overrides("compaction", CompactionSettings, env))
    settings.validate("compaction")
    return settings


def _read_yaml(path: str) -> Any:
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None
    return {} if data is None else data


class _EnvText(str):
    """A value read through `os.environ/NAME`: parsed like an env override for typed fields.

    A missing variable is only reported where the value is used, after the keys around it were
    checked, so a typo in a key is reported before a variable that is not set.
    """

    __slots__ = ("var", "where", "missing")
    var: str
    where: str
    missing: bool


def _env_text(value: str | None, var: str, where: str) -> _EnvText:
    text = _EnvText(value or "")
    text.var, text.where, text.missing = var, where, value is None
    return text


def _present(value: Any) -> Any:
    """`value`, with every `os.environ/NAME` inside it required to be set."""
    if isinstance(value, _EnvText) and value.missing:
        raise ConfigError(f"{value.where}: environment variable {value.var} is not set")
    if isinstance(value, dict):
        return {k: _present(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_present(v) for v in value]
    return value


def _resolve_env_refs(value: Any, where: str, env: Mapping[str, str]) -> Any:
    """Replace every `os.environ/NAME` string by the variable's value (missing: ConfigError)."""
    if isinstance(value, dict):
        return {k: _resolve_env_refs(v, _join(where, str(k)), env) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve_env_refs(v, f"{where}[{i}]", env) for i, v in enumerate(value)]
    if isinstance(value, str) and value.startswith(ENV_REF):
        name = value[len(ENV_REF):]
        return _env_text(env.get(name), name, where)
    return value


def _build_section(name: str, raw: Any, env: Mapping[str, str]) -> Any:
    cls = SECTIONS[name]
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{name}: expected a mapping, got {_tname(raw)}")
    values = _typed_fields(cls, raw, name)
    values.update(_env_overrides(name, cls, env))
    return cls(**values)


def _typed_fields(cls: type[Any], raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Check keys and types of one mapping against a settings dataclass."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in hints:
            raise ConfigError(_unknown_msg(str(key), where, names))
        out[key] = _coerce(value, hints[key], _join(where, key))
    return out


def _env_overrides(section: str, cls: type[Any], env: Mapping[str, str]) -> dict[str, Any]:
    prefix = f"{ENV_PREFIX}{section.upper()}__"
    hints = typing.get_type_hints(cls)
    out: dict[str, Any] = {}
    for var, text in env.items():
        if not var.startswith(prefix):
            continue
        key = var[len(prefix):].lower()
        if key not in hints or key == "extra":
            raise ConfigError(f"{var}: unknown setting {section}.{key}")
        out[key] = _parse_env(text, hints[key], var)
    return out


def _parse_env(text: str, tp: Any, var: str) -> Any:
    """Typed parsing of one override string; errors name the variable."""
    optional, base = _split_optional(tp)
    if optional and text.strip().lower() in ("", "null", "none"):
        return None
    if typing.get_origin(base) is typing.Literal:
        return _choice(text.strip(), base, var)
    try:
        if base is bool:
            return _parse_bool(text)
        if base is int:
            return int(text.strip())
        if base is float:
            return float(text.strip())
    except ValueError:
        raise ConfigError(f"{var}: expected {_type_word(base)}, got {text!r}") from None
    if base is str:
        return text
    if typing.get_origin(base) is tuple:  # tuple[str, ...]: a comma-separated list
        return tuple(item.strip() for item in text.split(",") if item.strip())
    raise ConfigError(f"{var}: this setting cannot be set from the environment")


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Accept `value` if it has type `tp` (ints are accepted for floats); else ConfigError."""
    optional, base = _split_optional(tp)
    value = _present(value)
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{where}: expected {_type_word(base)}, got null")
    if isinstance(value, _EnvText) and base is not str:
        return _parse_env(value, tp, f"{where} (from environment variable {value.var})")
    if base is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if typing.get_origin(base) is typing.Literal:
        return _choice(value, base, where)
    origin = typing.get_origin(base) or base
    if origin is tuple:
        return _str_tuple(value, where)
    ok = isinstance(value, origin) and not (origin is int and isinstance(value, bool))
    if not ok:
        raise ConfigError(f"{where}: expected {_type_word(base)}, got {_tname(value)}")
    return value


def _str_tuple(value: Any, where: str) -> tuple[str, ...]:
    """A YAML list of strings (or one string) as a tuple; ConfigError naming the key otherwise."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ConfigError(f"{where}: expected a list of strings, got {_tname(value)}")
    return tuple(items)


def _choice(value: Any, literal: Any, where: str) -> Any:
    """`value` when it is one of the Literal's choices; ConfigError naming them otherwise."""
    choices = typing.get_args(literal)
    if value not in choices:
        raise ConfigError(f"{where}: must be one of {', '.join(map(str, choices))}, got {value!r}")
    return value


def _split_optional(tp: Any) -> tuple[bool, Any]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return len(args) < len(typing.get_args(tp)), args[0]
    return False, tp


def _build_model_list(raw: Any, compaction: CompactionSettings) -> tuple[ModelEntry, ...]:
    if raw is None or raw == []:
        return tuple(dataclasses.replace(m, compaction=compaction) for m in default_model_list())
    if not isinstance(raw, list):
        raise ConfigError(f"model_list: expected a list, got {_tname(raw)}")
    return tuple(_build_entry(item, f"model_list[{i}]", compaction) for i, item in enumerate(raw))


def _build_entry(raw: Any, where: str, compaction: CompactionSettings) -> ModelEntry:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping, got {_tname(raw)}")
    for key in raw:
        if key not in MODEL_ENTRY_KEYS:
            raise ConfigError(_unknown_msg(str(key), where, list(MODEL_ENTRY_KEYS)))
    name = _required_str(raw, "model_name", where)
    params = _build_params(raw.get("litellm_params", _NOTHING), f"{where}.litellm_params")
    window = _coerce(raw.get("context_window"), int | None, f"{where}.context_window")
    info = _coerce(raw.get("model_info"), dict | None, f"{where}.model_info") or {}
    if window is None and isinstance(info.get("max_input_tokens"), int):
        window = info["max_input_tokens"]
    overrides = raw.get("compaction") or {}
    if not isinstance(overrides, dict):
        raise ConfigError(f"{where}.compaction: expected a mapping, got {_tname(overrides)}")
    merged = dataclasses.replace(compaction, **_typed_fields(CompactionSettings, overrides,
                                                             f"{where}.compaction"))
    return ModelEntry(name, params, window, merged)


def _build_params(raw: Any, where: str) -> LiteLLMParams:
    if raw is _NOTHING:
        raise ConfigError(f"{where}: required")
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping, got {_tname(raw)}")
    for key in raw:
        if key not in KNOWN_LITELLM_PARAMS and not str(key).startswith(KNOWN_LITELLM_PREFIXES):
            raise ConfigError(_unknown_msg(str(key), where, sorted(KNOWN_LITELLM_PARAMS)))
    model = _required_str(raw, "model", where)
    api_base = _coerce(raw.get("api_base"), str | None, f"{where}.api_base")
    api_key = _coerce(raw.get("api_key"), str | None, f"{where}.api_key")
    extra = _present({k: v for k, v in raw.items() if k not in ("model", "api_base", "api_key")})
    params = LiteLLMParams(model, api_base.rstrip("/") if api_base else None, api_key or None, extra)
    if params.uses_openai_wire:
        params = dataclasses.replace(params, extra=_fast_path_params(extra, where))
    return params


def _fast_path_params(extra: Mapping[str, Any], where: str) -> dict[str, Any]:
    """OpenAI-wire entries skip litellm: only params with an HTTP meaning apply; others are errors.

    Returns `extra` with the timeouts as floats (an `os.environ/` value arrives as text).
    """
    out = dict(extra)
    for key, value in extra.items():
        if key not in FAST_PATH_PARAMS:
            raise ConfigError(f"{where}.{key}: not applied to an OpenAI-compatible upstream (sent "
                              f"directly, without litellm); supported there: "
                              f"{', '.join(sorted(FAST_PATH_PARAMS))}")
        if key in ("timeout", "stream_timeout"):
            out[key] = _seconds(value, f"{where}.{key}")
        elif key == "organization" and not isinstance(value, str):
            raise ConfigError(f"{where}.{key}: expected a string, got {_tname(value)}")
        if key in ("extra_headers", "headers") and not isinstance(value, dict):
            raise ConfigError(f"{where}.{key}: expected a mapping of header names to values, "
                              f"got {_tname(value)}")
    return out


def _seconds(value: Any, where: str) -> float:
    seconds = 0.0
    if isinstance(value, int | float | str) and not isinstance(value, bool):
        with contextlib.suppress(ValueError):
            seconds = float(value)
    if not seconds > 0:
        raise ConfigError(f"{where}: expected a positive number of seconds, got {value!r}")
    return seconds


def _required_str(raw: Mapping[str, Any], key: str, where: str) -> str:
    if key not in raw:
        raise ConfigError(f"{where}.{key}: required")
    value = raw[key]
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}.{key}: expected a non-empty string, got {_tname(value)}")
    return value


def _validate(settings: Settings) -> None:
    settings.compaction.validate("compaction")
    for i, entry in enumerate(settings.model_list):
        entry.compaction.validate(f"model_list[{i}].compaction")
        if entry.context_window is not None and entry.context_window < 1_024:
            raise ConfigError(f"model_list[{i}].context_window: must be at least 1024 tokens")
    server = settings.server
    if not 0 <= server.port <= 65_535:
        raise ConfigError(f"server.port: must be between 0 and 65535, got {server.port}")
    if server.log_format not in ("json", "console"):
        raise ConfigError(f"server.log_format: must be 'json' or 'console', got {server.log_format!r}")
    if server.max_body_bytes < 1_024:
        raise ConfigError("server.max_body_bytes: must be at least 1024")
    for name in ("upstream_timeout_s", "upstream_connect_timeout_s"):
        if getattr(server, name) <= 0:
            raise ConfigError(f"server.{name}: must be > 0")
    _validate_networks(server.trusted_proxies)
    if server.log_level.lower() not in LOG_LEVELS:
        raise ConfigError(f"server.log_level: must be one of {', '.join(LOG_LEVELS)}, "
                          f"got {server.log_level!r}")
    url = settings.store.url
    if url is not None and not url.startswith(("postgresql://", "postgres://")):
        raise ConfigError("store.url: must start with postgresql:// (leave it unset for SQLite)")
    _validate_ranges(settings)


def _validate_networks(entries: tuple[str, ...]) -> None:
    for entry in entries:
        try:
            ipaddress.ip_network(entry.strip(), strict=False)
        except ValueError:
            raise ConfigError(f"server.trusted_proxies: {entry!r} is not an IP address or "
                              "CIDR block") from None


def _validate_ranges(settings: Settings) -> None:
    """Numeric knobs outside their sane range are errors naming the key."""
    checks: tuple[tuple[str, float, float, float], ...] = (
              ("recall.max_rounds", settings.recall.max_rounds, 0, 10),
              ("recall.search_limit", settings.recall.search_limit, 1, 100),
              ("summarizer.timeout_s", settings.summarizer.timeout_s, 0.001, 3_600),
              ("summarizer.breaker_failures", settings.summarizer.breaker_failures, 1, 1_000),
              ("summarizer.breaker_reset_s", settings.summarizer.breaker_reset_s, 0.001, 86_400),
              ("server.malloc_trim_s", settings.server.malloc_trim_s, 0, 86_400),
              ("server.header_timeout_s", settings.server.header_timeout_s, 0.001, 3_600),
              ("server.body_timeout_s", settings.server.body_timeout_s, 0.001, 3_600),
              ("server.min_body_bytes_per_s", settings.server.min_body_bytes_per_s, 1, 1 << 40),
              ("server.max_connections", settings.server.max_connections, 1, 1_000_000),
              ("server.cache_mib", settings.server.cache_mib, 8, 1_048_576),
              ("server.engine_threads", settings.server.engine_threads, 1, 64),
              ("store.busy_timeout_ms", settings.store.busy_timeout_ms, 0, 600_000),
              ("store.lease_s", settings.store.lease_s, 1, 86_400),
              ("store.cache_mib", settings.store.cache_mib, 1, 65_536),
              ("store.mmap_mib", settings.store.mmap_mib, 0, 2_047))
    if settings.store.retention_days is not None:
        checks += (("store.retention_days", settings.store.retention_days, 0.001, 36_500),)
    for key, value, low, high in checks:
        if not low <= value <= high:
            raise ConfigError(f"{key}: must be between {low:g} and {high:g}, got {value}")


def _unknown_msg(key: str, where: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{_join(where, key)}: unknown key{hint}"


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _type_word(tp: Any) -> str:
    origin = typing.get_origin(tp) or tp
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            dict: "a mapping", list: "a list"}.get(origin, str(tp))


def _tname(value: Any) -> str:
    return "null" if value is None else type(value).__name__
