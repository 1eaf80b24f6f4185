"""LiteLLM's own proxy as a benchmark peer: found in `.venv-litellm-proxy` (`make bench-deps`).

Our pinned litellm (1.110.2) needs `litellm-proxy`, which is not on PyPI, so the comparison runs
litellm[proxy]==1.81.16 from a separate venv, one worker, no database, telemetry off.
`CTXPROXY_BENCH_LITELLM` may point at another `litellm` executable.
"""

from __future__ import annotations

import os
from pathlib import Path

from bench.common import MODEL, REPO, Server, free_port, spawn

VENV = REPO / ".venv-litellm-proxy"
SKIPPED = "litellm proxy: skipped (run make bench-deps)"


def executable() -> Path | None:
    """The `litellm` CLI to run, or None when the optional venv is absent."""
    override = os.environ.get("CTXPROXY_BENCH_LITELLM")
    candidate = Path(override) if override else VENV / "bin" / "litellm"
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def config(upstream_url: str) -> str:
    """A model_list routing the benchmark model to the fake upstream (same as ctxproxy's)."""
    return "\n".join([
        "model_list:", f"  - model_name: {MODEL}", "    litellm_params:",
        f"      model: openai/{MODEL}", f"      api_base: {upstream_url}", "      api_key: sk-fake",
        "litellm_settings:", "  telemetry: false", "  drop_params: true", ""])


def start(workdir: Path, upstream_url: str, timeout_s: float = 120.0) -> Server | None:
    """Start LiteLLM's proxy on loopback and wait for readiness; None when it is not installed."""
    binary = executable()
    if binary is None:
        return None
    cfg = workdir / "litellm.yaml"
    cfg.write_text(config(upstream_url))
    port = free_port()
    argv = [str(binary), "--config", str(cfg), "--host", "127.0.0.1", "--port", str(port),
            "--num_workers", "1"]
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False",
           "LITELLM_LOG": "ERROR", "STORE_MODEL_IN_DB": "False",
           "DISABLE_SCHEMA_UPDATE": "True", "NO_DOCS": "True"}
    return spawn("litellm proxy", argv, port, "/health/liveliness", workdir / "litellm.log", env,
                 timeout_s)
