"""The `ctxproxy` command: check-config outcomes and --help."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from proxy.cli import main as cli

ROOT = Path(__file__).resolve().parents[3]
VALID = """
model_list:
  - model_name: gpt-4o-mini
    litellm_params:
      model: openai/gpt-4o-mini
      api_key: os.environ/MY_KEY
"""


def run_check(path: Path, env: dict[str, str]) -> tuple[int, str]:
    out = io.StringIO()
    args = cli.build_parser().parse_args(["check-config", str(path)])
    return cli.run_check_config(args, env, out), out.getvalue()


def test_check_config_valid(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(VALID)
    code, out = run_check(path, {"MY_KEY": "sk-secret-value-123456789"})
    assert code == 0
    assert "gpt-4o-mini -> openai/gpt-4o-mini" in out and "configured key" in out
    assert "sk-secret" not in out


def test_check_config_invalid_names_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(VALID.replace("api_key", "api_kee"))
    assert run_check(path, {})[0] == cli.EXIT_CONFIG_ERROR
    assert "model_list[0].litellm_params.api_kee: unknown key" in capsys.readouterr().err


def test_check_config_missing_env_var(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(VALID)
    assert run_check(path, {})[0] == cli.EXIT_CONFIG_ERROR
    assert "environment variable MY_KEY is not set" in capsys.readouterr().err


def test_main_check_config_exit_code(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("store:\n  path: 3\n")
    assert cli.main(["check-config", str(path)]) == cli.EXIT_CONFIG_ERROR


@pytest.mark.integration  # two `python -m proxy` subprocesses
def test_python_m_proxy_help() -> None:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    result = subprocess.run([sys.executable, "-m", "proxy", "--help"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    for command in ("serve", "check-config"):
        assert command in result.stdout
    serve = subprocess.run([sys.executable, "-m", "proxy", "serve", "--help"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=60, check=False)
    assert "--config FILE" in serve.stdout and "--port" in serve.stdout
