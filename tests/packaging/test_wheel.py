"""The built wheel, installed (not editable) into a fresh venv, serves `ctxproxy serve` and /ui.

Offline: the dependencies come from the wheelhouse `make test` builds (`make wheelhouse`, from the
pinned constraints); without one the test is skipped with the command that builds it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WHEELHOUSE = Path(os.environ.get("CTXPROXY_WHEELHOUSE", ROOT / ".wheelhouse"))
ADMIN_KEY = "packaging-admin-key-0123456789"
STATIC_ASSETS = {"/ui/static/app.js": "text/javascript", "/ui/static/style.css": "text/css"}

pytestmark = pytest.mark.skipif(not any(WHEELHOUSE.glob("setuptools-*.whl")),
                                reason=f"no wheelhouse at {WHEELHOUSE}: run `make wheelhouse`")


def run(*argv: str | Path, cwd: Path, timeout: float = 600) -> str:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(WHEELHOUSE)})
    assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel built from this checkout and its pinned dependencies."""
    work = tmp_path_factory.mktemp("wheel")
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "--find-links", WHEELHOUSE,
        "-w", work / "dist", ROOT, cwd=work)
    (wheel,) = (work / "dist").glob("ctxproxy-*.whl")
    run(sys.executable, "-m", "venv", work / "venv", cwd=work)
    run(work / "venv" / "bin" / "pip", "install", "--no-index", "--find-links", WHEELHOUSE,
        "-c", ROOT / "constraints.txt", wheel, cwd=work)
    return work


def test_the_wheel_carries_every_package_and_the_ui_assets(installed: Path) -> None:
    (wheel,) = (installed / "dist").glob("ctxproxy-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in ("proxy", "proxy/server", "proxy/upstream", "proxy/recall", "proxy/inspector",
                    "proxy/cli", "proxy/observability", "compaction", "store", "config", "replay"):
        assert f"{package}/__init__.py" in names, package
    assets = ("index.html", "login.html", "app.js", "style.css")
    assert {f"proxy/inspector/static/{n}" for n in assets} <= names
    assert not any(n.startswith(("tests/", "bench/")) for n in names)


def test_a_default_install_has_no_matplotlib(installed: Path) -> None:
    python = installed / "venv" / "bin" / "python"
    out = run(python, "-c", "import importlib.util as u; print(u.find_spec('matplotlib') is None)",
              cwd=installed)
    assert out.strip() == "True"


@pytest.fixture
def served(installed: Path) -> Iterator[str]:
    """`ctxproxy serve` from the installed console script, run outside the checkout."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "CTXPROXY_SERVER__ADMIN_KEY": ADMIN_KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "CTXPROXY_STORE__PATH": str(installed / "store.db")}
    proc = subprocess.Popen([str(installed / "venv" / "bin" / "ctxproxy"), "serve", "--port", str(port)],
                            cwd=installed, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, proc)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _wait_ready(base: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "exited"
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)
    raise AssertionError("ctxproxy serve did not become healthy within 60 s")


def test_the_installed_command_serves_the_inspector_assets(served: str) -> None:
    for path, content_type in STATIC_ASSETS.items():
        request = urllib.request.Request(served + path, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert resp.status == 200 and resp.headers["Content-Type"].startswith(content_type)
            assert len(resp.read()) > 500
    request = urllib.request.Request(served + "/ui/", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert b"<html" in resp.read().lower()
