"""The real server as a subprocess (`python -m proxy serve`), for crash and soak tests and benches."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120.0  # a loaded machine imports slowly; only a server that never comes up fails


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(path: Path, upstream_url: str, store_path: Path, model: str = "gpt-4o-mini") -> Path:
    """A YAML config routing `model` to `upstream_url`, storing in `store_path`."""
    path.write_text(f"""model_list:
  - model_name: {model}
    litellm_params:
      model: openai/{model}
      api_base: {upstream_url}
    context_window: 128000
store:
  path: {store_path}
server:
  log_level: warning
""", encoding="utf-8")
    return path


@dataclass
class ServerProcess:
    """One `ctxproxy serve` child process on a loopback port."""

    config: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> ServerProcess:
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "proxy", "serve", "--config", str(self.config), "--port", str(self.port)],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        await self._wait_ready()
        return self

    async def _wait_ready(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + START_TIMEOUT_S
        async with aiohttp.ClientSession() as session:
            while loop.time() < deadline:
                assert self.process is not None and self.process.poll() is None, "the server exited"
                try:
                    async with session.get(self.url + "/readyz") as resp:
                        if resp.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.2)
        raise AssertionError(f"the server did not become ready within {START_TIMEOUT_S} s")

    def kill(self) -> None:
        """SIGKILL: no shutdown hook, no final checkpoint."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        """SIGTERM and wait (a graceful stop), killing it when it does not exit."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()
