"""The built wheel, installed (not editable) into a fresh venv, serves `ctxproxy serve` and /ui.

Offline: the dependencies come from the wheelhouse `make test` builds (`make wheelhouse`, from the
pinned constraints); without one the test is skipped with the command that builds it.
"""

from __future__ import annotations

import json
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
    # The venv gets no pip of its own and nothing is byte-compiled at install: this interpreter's pip
    # installs into it (`--python`), and the modules compile when first imported. Same wheel, same
    # pinned dependencies, same fresh venv; a quarter of the time (ensurepip and compileall were most of it).
    run(sys.executable, "-m", "venv", "--without-pip", work / "venv", cwd=work)
    run(sys.executable, "-m", "pip", "--python", work / "venv" / "bin" / "python", "install", "--no-compile",
        "--no-index", "--find-links", WHEELHOUSE, "-c", ROOT / "constraints.txt", wheel, cwd=work)
    return work


def test_the_wheel_carries_every_package_and_the_ui_assets(installed: Path) -> None:
    (wheel,) = (installed / "dist").glob("ctxproxy-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in ("proxy", "proxy/server", "proxy/upstream", "proxy/recall", "proxy/inspector",
                    "proxy/cli", "proxy/observability", "compaction", "compaction/view", "compaction/steps",
                    "compaction/summarize", "compaction/anchors", "compaction/recall", "compaction/resend",
                    "store", "store/sqlite", "store/postgres", "store/encoding", "store/query", "config",
                    "replay"):
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


# -- the Docker image's runtime stage, emulated (no Docker engine here): its ENV, CMD and HEALTHCHECK --

DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def _instructions() -> dict[str, str]:
    """The runtime stage's instructions by keyword (continuation lines joined)."""
    text = DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    runtime = text.split("\nFROM ")[-1]
    out: dict[str, str] = {}
    for line in runtime.splitlines():
        keyword, _, rest = line.strip().partition(" ")
        if keyword.isupper():
            out[keyword] = rest.strip()
    return out


def _image_env(spec: str, data: Path, venv: Path) -> dict[str, str]:
    """`ENV A=1 B=2` as the container would see it, with /data and the venv moved to this machine."""
    env: dict[str, str] = {}
    for pair in spec.split():
        name, _, value = pair.partition("=")
        env[name] = value.replace("/opt/ctxproxy/bin", str(venv / "bin")).replace(
            "$PATH", os.environ["PATH"]).replace("/data", str(data))
    return env


def _command(json_array: str, port: int) -> list[str]:
    return [str(a).replace("8080", str(port)) for a in json.loads(json_array)]


def test_the_images_cmd_serves_and_its_healthcheck_tells(installed: Path, tmp_path: Path) -> None:
    """The runtime stage's CMD, run with its ENV in its WORKDIR, answers the HEALTHCHECK command
    (exit 0); once the server is gone the same command exits non-zero."""
    spec = _instructions()
    assert spec["WORKDIR"] == "/data" and spec["EXPOSE"] == "8080"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, **_image_env(spec["ENV"], tmp_path, installed / "venv")}
    healthcheck = _command(spec["HEALTHCHECK"].split(" CMD ", 1)[1], port)
    cmd = _command(spec["CMD"], port)
    assert cmd[:2] == ["ctxproxy", "serve"] and healthcheck[0] == "python"
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_ready(f"http://127.0.0.1:{port}", proc)
        assert subprocess.run(healthcheck, env=env, timeout=30).returncode == 0
        assert (tmp_path / "ctxproxy.db").is_file()  # the store on the image's volume
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert subprocess.run(healthcheck, env=env, timeout=30, capture_output=True).returncode != 0
