"""deploy/ validated offline: Kubernetes manifests against the bundled API schemas (strict), plus the
wiring a schema cannot see (probes, selectors, referenced objects, configs ctxproxy accepts), the
compose file and the Dockerfile."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from config.loader import load_settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S_VERSION = "1.31.0"
Doc = dict[str, Any]


def _k8s() -> dict[str, Doc]:
    docs = [d for p in sorted((DEPLOY / "kubernetes").glob("*.yaml"))
            for d in yaml.safe_load_all(p.read_text(encoding="utf-8")) if d]
    return {d["kind"]: d for d in docs}


@pytest.mark.parametrize("kind", ["Deployment", "Service", "ConfigMap", "Secret", "PodDisruptionBudget"])
def test_each_manifest_passes_the_strict_schema(kind: str) -> None:
    assert kubernetes_validate.validate(_k8s()[kind], K8S_VERSION, strict=True)


def test_a_broken_manifest_is_refused() -> None:
    broken = _k8s()["Deployment"]
    broken["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_the_deployment_probes_and_wiring() -> None:
    docs = _k8s()
    deployment = docs["Deployment"]
    pod = deployment["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    labels = pod["metadata"]["labels"]
    for selector in (deployment["spec"]["selector"]["matchLabels"], docs["Service"]["spec"]["selector"],
                     docs["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"]):
        assert selector.items() <= labels.items()
    assert docs["PodDisruptionBudget"]["spec"]["minAvailable"] < deployment["spec"]["replicas"]
    assert container["envFrom"][0]["secretRef"]["name"] == docs["Secret"]["metadata"]["name"]
    assert pod["spec"]["volumes"][0]["configMap"]["name"] == docs["ConfigMap"]["metadata"]["name"]
    assert docs["Secret"]["stringData"]["CTXPROXY_STORE__URL"].startswith("postgresql://")


def test_the_shipped_configs_load(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    secret = _k8s()["Secret"]["stringData"]
    for text in (_k8s()["ConfigMap"]["data"]["config.yaml"],
                 (DEPLOY / "compose" / "config.yaml").read_text(encoding="utf-8")):
        config.write_text(text, encoding="utf-8")
        settings = load_settings(str(config), dict(secret))
        assert settings.store.url is not None and settings.server.host == "0.0.0.0"


def test_compose_runs_two_replicas_on_postgres_scraped_by_prometheus() -> None:
    compose = yaml.safe_load((DEPLOY / "compose" / "docker-compose.yml").read_text(encoding="utf-8"))
    services = compose["services"]
    replicas = [s for s in services.values() if s.get("image") == "ctxproxy:local"]
    assert len(replicas) == 2 and "postgres" in services and "prometheus" in services
    assert all(r["environment"]["CTXPROXY_STORE__URL"].startswith("postgresql://") for r in replicas)
    prometheus = yaml.safe_load((DEPLOY / "compose" / "prometheus.yml").read_text(encoding="utf-8"))
    job = prometheus["scrape_configs"][0]
    names = {n for n, s in services.items() if s.get("image") == "ctxproxy:local"}
    assert job["metrics_path"] == "/metrics"
    assert {t.split(":")[0] for t in job["static_configs"][0]["targets"]} == names


def test_the_image_is_multi_stage_non_root_with_a_healthcheck() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    assert len(re.findall(r"^FROM ", dockerfile, flags=re.MULTILINE)) >= 2
    users = re.findall(r"^USER (\S+)", dockerfile, flags=re.MULTILINE)
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert re.search(r"^HEALTHCHECK .*", dockerfile, flags=re.MULTILINE)
    assert "/healthz" in dockerfile.split("HEALTHCHECK", 1)[1]
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    packages = re.search(r'include = \[([^\]]*)\]', pyproject)
    assert packages is not None
    for package in re.findall(r'"(\w+)\*"', packages.group(1)):  # every package is in the image
        assert re.search(rf"^COPY {package} {package}$", dockerfile, flags=re.MULTILINE), package
