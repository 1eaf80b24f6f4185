"""config.loader: YAML shape, strictness (key paths in errors), env references and overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.errors import ConfigError
from config.loader import compaction_with, documented_keys, env_override_names, load_settings
from config.settings import OPENAI_API_BASE, CompactionSettings

FULL = """
model_list:
  - model_name: gpt-4o-mini
    litellm_params:
      model: openai/gpt-4o-mini
      api_base: https://api.openai.com/v1/
      api_key: os.environ/OPENAI_API_KEY
      temperature: 0.2
    context_window: 128000
  - model_name: claude
    litellm_params:
      model: anthropic/claude-sonnet-4
      aws_region_name: eu-west-1
    compaction:
      fresh_tail_count: 8
summarizer:
  model: openai/gpt-4o-mini
  api_key: os.environ/OPENAI_API_KEY
store:
  path: /tmp/x.db
compaction:
  leaf_min_fanout: 6
server:
  port: 9999
  upstream_timeout_s: 30
recall:
  max_rounds: 2
"""


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "ctxproxy.yaml"
    path.write_text(text)
    return str(path)


def test_full_config_loads_with_env_references(tmp_path: Path) -> None:
    s = load_settings(write(tmp_path, FULL), {"OPENAI_API_KEY": "sk-from-env"})
    first, second = s.model_list
    assert first.litellm_params.api_key == "sk-from-env"
    assert first.litellm_params.api_base == "https://api.openai.com/v1"
    assert first.litellm_params.extra == {"temperature": 0.2}
    assert first.context_window == 128000
    assert second.litellm_params.extra == {"aws_region_name": "eu-west-1"}
    assert second.compaction.fresh_tail_count == 8
    assert second.compaction.leaf_min_fanout == 6  # global section, then the per-model override
    assert first.compaction.fresh_tail_count == 32
    assert s.summarizer.api_key == "sk-from-env"
    assert (s.store.path, s.server.port, s.server.upstream_timeout_s, s.recall.max_rounds) == (
        "/tmp/x.db", 9999, 30.0, 2)


def test_no_file_gives_defaults() -> None:
    s = load_settings(None, {})
    (entry,) = s.model_list
    assert entry.model_name == "*" and entry.litellm_params.api_base == OPENAI_API_BASE
    assert entry.litellm_params.api_key is None
    found = s.find_model("gpt-4.1")
    assert found is not None and found.resolved_params("gpt-4.1").model == "openai/gpt-4.1"


@pytest.mark.parametrize(("text", "message"), [
    ("model_list:\n - model_name: a\n   litellm_params: {model: openai/a}\n"
     " - model_name: b\n   litellm_params: {modle: openai/b}\n",
     "model_list[1].litellm_params.modle: unknown key"),
    ("store:\n  pth: x\n", "store.pth: unknown key (did you mean 'path'?)"),
    ("sever:\n  port: 1\n", "sever: unknown key"),
    ("server:\n  port: eighty\n", "server.port: expected an integer, got str"),
    ("compaction:\n  background: 3\n", "compaction.background: expected a boolean, got int"),
    ("model_list:\n - model_name: a\n", "model_list[0].litellm_params: required"),
    ("model_list:\n - litellm_params: {model: x}\n", "model_list[0].model_name: required"),
    ("model_list:\n - model_name: a\n   litellm_params: {model: x}\n   compaction: {fresh_tail: 3}\n",
     "model_list[0].compaction.fresh_tail: unknown key"),
    ("compaction:\n  prepare_token_percent: 90\n", "compaction.prepare_token_percent: must be below"),
    ("compaction:\n  oversized_last_message: cut\n",
     "compaction.oversized_last_message: must be one of reject, truncate, got 'cut'"),
    ("compaction:\n  sync_deadline_s: 0\n", "compaction.sync_deadline_s: must be between 0 and 3600"),
    ("- a\n- b\n", "top level must be a mapping"),
    ("server:\n  log_level: verbose\n", "server.log_level: must be one of debug, info"),
    ("recall:\n  max_rounds: 50\n", "recall.max_rounds: must be between 0 and 10, got 50"),
    ("recall:\n  search_limit: 0\n", "recall.search_limit: must be between 1 and 100, got 0"),
    ("summarizer:\n  timeout_s: 0\n", "summarizer.timeout_s: must be between"),
    ("summarizer:\n  breaker_failures: 0\n", "summarizer.breaker_failures: must be between"),
    ("store:\n  cache_mib: 0\n", "store.cache_mib: must be between 1 and 65536, got 0"),
    ("store:\n  mmap_mib: -1\n", "store.mmap_mib: must be between 0 and 2047, got -1"),
    ("store:\n  mmap_mib: 4096\n", "store.mmap_mib: must be between 0 and 2047, got 4096"),
    ("store:\n  cache_mib: 2.5\n", "store.cache_mib: expected an integer, got float"),
])
def test_errors_name_the_key_path(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(write(tmp_path, text), {})
    assert message in err.value.message


def test_env_references_fill_typed_fields(tmp_path: Path) -> None:
    text = "server:\n  port: os.environ/PORT\n  upstream_timeout_s: os.environ/TIMEOUT\n" \
           "compaction:\n  background: os.environ/BACKGROUND\n"
    s = load_settings(write(tmp_path, text), {"PORT": "9090", "TIMEOUT": "12.5", "BACKGROUND": "off"})
    assert (s.server.port, s.server.upstream_timeout_s, s.compaction.background) == (9090, 12.5, False)


def test_env_reference_with_a_bad_value_names_key_and_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(write(tmp_path, "server:\n  port: os.environ/PORT\n"), {"PORT": "eighty"})
    assert err.value.message == ("server.port (from environment variable PORT): expected an integer, "
                                 "got 'eighty'")


def test_missing_env_reference_names_key_and_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(write(tmp_path, FULL), {})
    assert err.value.message == (
        "model_list[0].litellm_params.api_key: environment variable OPENAI_API_KEY is not set")


def test_env_overrides_are_typed(tmp_path: Path) -> None:
    env = {"CTXPROXY_STORE__PATH": "/data/c.db", "CTXPROXY_SERVER__PORT": "9001",
           "CTXPROXY_COMPACTION__FRESH_TAIL_COUNT": "5", "CTXPROXY_SERVER__ADMIN_KEY": "adm",
           "CTXPROXY_COMPACTION__BACKGROUND": "false", "CTXPROXY_COMPACTION__CONTEXT_WINDOW": ""}
    s = load_settings(None, env)
    assert (s.store.path, s.server.port, s.compaction.fresh_tail_count) == ("/data/c.db", 9001, 5)
    assert s.server.admin_key == "adm" and s.compaction.background is False
    assert s.model_list[0].compaction.fresh_tail_count == 5


def test_store_memory_bounds_default_and_env(tmp_path: Path) -> None:
    """SQLite's page cache and memory map: 2 MiB and off by default, set in the file or the env."""
    assert (load_settings(None, {}).store.cache_mib, load_settings(None, {}).store.mmap_mib) == (2, 0)
    s = load_settings(write(tmp_path, "store:\n  cache_mib: 16\n  mmap_mib: 64\n"),
                      {"CTXPROXY_STORE__MMAP_MIB": "256"})
    assert (s.store.cache_mib, s.store.mmap_mib) == (16, 256)
    with pytest.raises(ConfigError, match="CTXPROXY_STORE__CACHE_MIB: expected an integer"):
        load_settings(None, {"CTXPROXY_STORE__CACHE_MIB": "lots"})


def test_env_override_beats_file_and_config_path_comes_from_env(tmp_path: Path) -> None:
    path = write(tmp_path, "server:\n  port: 7000\nstore:\n  path: a.db\n")
    s = load_settings(None, {"CTXPROXY_CONFIG": path, "CTXPROXY_SERVER__PORT": "7001"})
    assert (s.server.port, s.store.path) == (7001, "a.db")


@pytest.mark.parametrize(("env", "message"), [
    ({"CTXPROXY_SERVER__PORT": "x"}, "CTXPROXY_SERVER__PORT: expected an integer, got 'x'"),
    ({"CTXPROXY_COMPACTION__BACKGROUND": "maybe"}, "CTXPROXY_COMPACTION__BACKGROUND: expected a boolean"),
    ({"CTXPROXY_SERVER__PROT": "1"}, "CTXPROXY_SERVER__PROT: unknown setting server.prot"),
    ({"CTXPROXY_CONFIG": "/nonexistent/c.yaml"}, "/nonexistent/c.yaml: config file not found"),
])
def test_env_errors_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(None, env)
    assert message in err.value.message


def test_documented_keys_cover_sections_and_model_entries() -> None:
    keys = documented_keys()
    for key in ("store.path", "server.port", "server.admin_key", "compaction.fresh_tail_count",
                "summarizer.model", "recall.max_rounds", "model_list[].litellm_params.api_key",
                "model_list[].context_window", "model_list[].compaction.fresh_tail_count"):
        assert key in keys
    assert "CTXPROXY_STORE__PATH" in env_override_names()
    assert len(keys) == len(set(keys))


def test_trusted_proxies_from_yaml_and_env(tmp_path: Path) -> None:
    text = "server:\n  trusted_proxies: [10.0.0.0/8, '::1']\n"
    assert load_settings(write(tmp_path, text), {}).server.trusted_proxies == ("10.0.0.0/8", "::1")
    env = {"CTXPROXY_SERVER__TRUSTED_PROXIES": "127.0.0.1, 192.168.0.0/16"}
    assert load_settings(None, env).server.trusted_proxies == ("127.0.0.1", "192.168.0.0/16")
    with pytest.raises(ConfigError, match="server.trusted_proxies: 'nope' is not an IP address"):
        load_settings(write(tmp_path, "server:\n  trusted_proxies: [nope]\n"), {})
    with pytest.raises(ConfigError, match="server.trusted_proxies: expected a list of strings"):
        load_settings(write(tmp_path, "server:\n  trusted_proxies: [1]\n"), {})


def test_store_url_chooses_postgresql_and_is_validated() -> None:
    s = load_settings(None, {"CTXPROXY_STORE__URL": "postgresql://u@db:5432/ctx",
                             "CTXPROXY_STORE__LEASE_S": "5"})
    assert (s.store.url, s.store.lease_s) == ("postgresql://u@db:5432/ctx", 5.0)
    assert "postgresql" not in repr(s.store)  # a URL may carry a password: never in a repr
    assert load_settings(None, {}).store.url is None  # SQLite stays the default
    with pytest.raises(ConfigError) as err:
        load_settings(None, {"CTXPROXY_STORE__URL": "mysql://db/ctx"})
    assert err.value.message.startswith("store.url: must start with postgresql://")


def test_compaction_with_applies_typed_assignments_and_validates() -> None:
    changed = compaction_with("anchor_max_percent=3, background=false,sync_deadline_s=2.5")
    assert (changed.anchor_max_percent, changed.background, changed.sync_deadline_s) == (3, False, 2.5)
    assert compaction_with("") == CompactionSettings()
    base = CompactionSettings(fresh_tail_count=4)
    assert compaction_with("leaf_min_fanout=2", base).fresh_tail_count == 4
    for bad, message in [("anchor_max_percnt=3", "did you mean 'anchor_max_percent'"),
                         ("target_token_percent", "expected key=value"),
                         ("target_token_percent=x", "expected an integer"),
                         ("prepare_token_percent=50", "must be below target_token_percent")]:
        with pytest.raises(ConfigError, match=message):
            compaction_with(bad)
