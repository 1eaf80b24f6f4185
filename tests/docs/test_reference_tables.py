"""The reference tables stay true: every config key in docs/configuration.md, every metric in
docs/operations.md, every command on docs/apis.md, and back; the README's short tables agree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from config.loader import documented_keys, env_override_names, load_settings
from proxy.cli.main import build_parser
from proxy.observability.logging import RequestRecord
from proxy.observability.metrics import METRIC_NAMES, Metrics
from tests.docs.pages import DOCS, README, ROOT, pages, prose, table_rows, text

CONFIGURATION = DOCS / "configuration.md"
OPERATIONS = DOCS / "operations.md"
APIS = DOCS / "apis.md"
KEY = r"[a-z_\[\]]+(?:\.[a-z_<>]+)+"
PER_MODEL_COMPACTION = "model_list[].compaction."
# Pages a reader consults for keys and metrics (architecture.md has its own test, results.md is generated).
REFERENCE_PAGES = [p for p in pages() if p.name not in ("architecture.md", "results.md")]


def _config_rows() -> dict[str, list[str]]:
    return {cells[0].strip("`"): cells for cells in table_rows(CONFIGURATION, KEY)}


def test_every_config_key_has_a_row() -> None:
    rows = _config_rows()
    missing = [k for k in documented_keys()
               if k not in rows
               and not (k.startswith(PER_MODEL_COMPACTION)
                        and f"compaction.{k.removeprefix(PER_MODEL_COMPACTION)}" in rows)]
    assert missing == []


def test_documented_config_keys_exist() -> None:
    keys = set(documented_keys())
    rows = _config_rows()
    assert rows, "the configuration table is missing"
    unknown = [k for k in rows if k not in keys and not k.endswith(".<key>")]
    assert unknown == []


def test_readme_keys_are_real_and_agree_with_the_full_table() -> None:
    rows = _config_rows()
    readme = table_rows(README, KEY)
    assert readme, "the README's essential configuration table is missing"
    for cells in readme:
        key = cells[0].strip("`")
        assert key in rows, key
        assert cells[1] == rows[key][1], f"{key}: README default {cells[1]!r}, docs {rows[key][1]!r}"


def test_config_keys_named_anywhere_exist() -> None:
    """A backticked `section.key` is a config key, unless it is an event of the Logs table."""
    events = {cells[0].strip("`") for cells in table_rows(OPERATIONS, r"[a-z_]+\.[a-z_]+")}
    keys = set(documented_keys()) | events
    named = {(page.name, k) for page in REFERENCE_PAGES
             for k in re.findall(r"`((?:compaction|summarizer|store|server|recall)\.[a-z_]+)`", prose(page))}
    assert sorted((page, k) for page, k in named if k not in keys) == []


def test_env_overrides_named_anywhere_exist() -> None:
    names = set(env_override_names())
    named = {(page.name, v) for page in REFERENCE_PAGES
             for v in re.findall(r"\bCTXPROXY_[A-Z_]+__[A-Z_]+", text(page))}
    assert sorted((page, v) for page, v in named if v not in names) == []


@pytest.mark.parametrize("name", ["config.example.yaml", "compose/config.yaml"])
def test_the_example_configs_are_valid(name: str) -> None:
    example = ROOT / "deploy" / name
    env = {var: "x" for var in re.findall(r"os\.environ/([A-Z_]+)", text(example))}
    settings = load_settings(str(example), env)
    assert settings.model_list


def test_yaml_examples_in_the_docs_are_valid(tmp_path: Path) -> None:
    blocks = [(page.name, block) for page in pages()
              for block in re.findall(r"^```yaml\n(.*?)^```", text(page), flags=re.MULTILINE | re.DOTALL)]
    assert blocks, "the README's example configuration is missing"
    for i, (name, block) in enumerate(blocks):
        file = tmp_path / f"{i}.yaml"
        file.write_text(block, encoding="utf-8")
        env = {var: "x" for var in re.findall(r"os\.environ/([A-Z_]+)", block)}
        assert load_settings(str(file), env).model_list, name


def test_metric_table_matches_the_code() -> None:
    documented = {cells[0].strip("`") for cells in table_rows(OPERATIONS, r"ctxproxy_[a-z_]+")}
    assert documented == set(METRIC_NAMES)


def test_metrics_named_anywhere_exist() -> None:
    named = {(page.name, m) for page in REFERENCE_PAGES
             for m in re.findall(r"`(ctxproxy_[a-z_]+)(?:\{[a-z_,]*\})?`", text(page))}
    assert sorted((page, m) for page, m in named if m not in METRIC_NAMES) == []


def test_metric_names_are_registered() -> None:
    metrics = Metrics(store_size=lambda: 0.0)
    families = {f.name for f in text_string_to_metric_families(generate_latest(metrics.registry).decode())}
    # the parser reports counters without their `_total` suffix
    registered = {n if n in families else n.removesuffix("_total") for n in METRIC_NAMES}
    assert registered <= families


def test_request_line_fields_named_in_the_logs_table_exist() -> None:
    """Fields the `request` row names are the record's, and its cost fields are all named there."""
    (row,) = [cells for cells in table_rows(OPERATIONS, r"request") if cells[0] == "`request`"]
    named = set(re.findall(r"`([a-z_]+)`", row[1]))
    fields = set(RequestRecord("GET", "/").fields())
    assert sorted(named - fields) == []
    assert {"cache_read_tokens", "prefix_tokens", "billed_input_tokens_estimate",
            "full_history_billed_estimate"} <= named


def _commands() -> set[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert isinstance(sub.choices, dict)
    return set(sub.choices)


def test_command_table_matches_the_cli() -> None:
    section = prose(APIS).split("## Command line", 1)[1].split("\n## ", 1)[0]
    first_cells = re.findall(r"^\| (.+?) \| ", section, flags=re.MULTILINE)
    documented = {name for cell in first_cells for name in re.findall(r"`([a-z][a-z-]*)[ `]", cell)}
    assert documented == _commands()


def _code_commands(page: Path) -> list[str]:
    """Subcommands run in the page's code blocks (`ctxproxy X` at a line's start)."""
    code = "\n".join(re.findall(r"^```[^\n]*\n(.*?)^```", text(page), flags=re.MULTILINE | re.DOTALL))
    return re.findall(r"^ctxproxy ([a-z][a-z-]+)\b", code, flags=re.MULTILINE)


def test_commands_named_anywhere_exist() -> None:
    named = {(page.name, c) for page in REFERENCE_PAGES
             for c in re.findall(r"`ctxproxy ([a-z][a-z-]+)\b", prose(page)) + _code_commands(page)}
    assert sorted((page, c) for page, c in named if c not in _commands()) == []
