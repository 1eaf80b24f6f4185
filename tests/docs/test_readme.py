"""README stays true: every config key and metric name it should document is there, and back."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from config.loader import documented_keys
from proxy.observability.metrics import METRIC_NAMES, Metrics

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
PER_MODEL_COMPACTION = "model_list[].compaction."


def test_every_config_key_is_documented() -> None:
    missing = [k for k in documented_keys()
               if f"`{k}`" not in README
               and not (k.startswith(PER_MODEL_COMPACTION)
                        and f"`compaction.{k.removeprefix(PER_MODEL_COMPACTION)}`" in README)]
    assert missing == []


def test_documented_config_keys_exist() -> None:
    keys = set(documented_keys())
    rows = re.findall(r"^\| `([a-z_\[\]]+(?:\.[a-z_]+)+)` \|", README, flags=re.MULTILINE)
    assert rows, "the README config table is missing"
    unknown = [k for k in rows if k not in keys and not k.endswith(".<key>")]
    assert unknown == []


def test_metric_names_match_the_readme() -> None:
    documented = set(re.findall(r"`(ctxproxy_[a-z_]+)`", README))
    assert documented == set(METRIC_NAMES)


def test_metric_names_are_registered() -> None:
    metrics = Metrics(store_size=lambda: 0.0)
    families = {f.name for f in text_string_to_metric_families(generate_latest(metrics.registry).decode())}
    # the parser reports counters without their `_total` suffix
    registered = {n if n in families else n.removesuffix("_total") for n in METRIC_NAMES}
    assert registered <= families
