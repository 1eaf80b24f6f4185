"""`ctxproxy serve --workers N`: N processes listen on one port and serve, on SQLite and PostgreSQL.

Workers are found as the master's child processes; each must hold a listening socket on the port
(read from /proc). A SIGKILLed worker is replaced, and SIGTERM stops the master and every worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import openai
import pytest

from config.settings import StoreSettings
from store.factory import open_store
from tests.fakes.upstream import FakeUpstream
from tests.pg.replicas import MODEL, Replica, start_replica, wait_ready, write_config

pytestmark = pytest.mark.skipif(not Path("/proc/self/net/tcp").exists(), reason="reads Linux /proc")


def _children(pid: int) -> set[int]:
    """Live processes whose parent is `pid` (from /proc/*/stat: state and ppid follow the name)."""
    found: set[int] = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, ppid = stat.read_text().rsplit(")", 1)[1].split()[:2]
        except OSError:
            continue  # gone meanwhile
        if int(ppid) == pid and state != "Z":
            found.add(int(stat.parent.name))
    return found


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # 0A: LISTEN
                inodes.add(fields[9])
    return inodes


def _listens(pid: int, port: int) -> bool:
    """The process holds a listening socket on `port`."""
    wanted = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    found = False
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):  # an fd closed (or the process gone) meanwhile
            found = found or os.readlink(fd) in wanted
    return found


async def _workers_listening(master: Replica, count: int, gone: int = 0) -> set[int]:
    """The master's `count` workers once each listens on the port (and `gone` is no longer one)."""
    for _ in range(600):
        children = _children(master.proc.pid)
        ready = all(_listens(pid, master.port) for pid in children)
        if gone not in children and len(children) == count and ready:
            return children
        await asyncio.sleep(0.2)
    raise AssertionError(f"{count} listening workers never appeared: {_children(master.proc.pid)}")


async def _chat(master: Replica, first: int, turns: int) -> list[str | None]:
    """`turns` requests, each on a fresh connection (so the kernel may pick any worker), each its
    own tenant (keys numbered from `first`)."""
    answers = []
    for i in range(first, first + turns):
        async with openai.AsyncOpenAI(base_url=master.base_url + "/v1", api_key=f"sk-workers-{i:020d}",
                                      max_retries=0, timeout=60) as client:
            reply = await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": f"hello number {i}"}])
        answers.append(reply.choices[0].message.content)
    return answers


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_n_workers_share_the_port_and_the_store(backend: str, request: pytest.FixtureRequest,
                                                      tmp_path: Path, fake_upstream: FakeUpstream) -> None:
    store = (StoreSettings(url=request.getfixturevalue("pg_url")) if backend == "postgres"
             else StoreSettings(path=str(tmp_path / "workers.db")))
    env = {"CTXPROXY_STORE__URL": store.url} if store.url else {"CTXPROXY_STORE__PATH": store.path}
    config = write_config(tmp_path / "workers.yaml", fake_upstream.url, None)
    master = start_replica(config, env, extra_args=("--workers", "2"))
    try:
        await wait_ready(master)
        first = await _workers_listening(master, 2)
        assert await _chat(master, 0, 6) == ["ok"] * 6
        os.kill(min(first), signal.SIGKILL)
        second = await _workers_listening(master, 2, gone=min(first))
        assert min(first) not in second and len(second & first) == 1  # replaced, the other kept
        assert await _chat(master, 6, 2) == ["ok"] * 2
    finally:
        master.stop()
    assert master.proc.returncode == 0 and not any(Path(f"/proc/{pid}").exists() for pid in second)
    opened = open_store(store)
    try:
        assert len(opened.tenant_ids()) == 8  # every request's conversation stored once, by some worker
    finally:
        opened.close()


def test_workers_need_a_fixed_port_and_a_positive_count(capsys: pytest.CaptureFixture[str]) -> None:
    from proxy.cli.main import main

    assert main(["serve", "--workers", "2", "--port", "0"]) == 2
    assert "--workers needs a fixed --port" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--workers", "0"])
    assert exit_info.value.code == 2 and "must be at least 1" in capsys.readouterr().err
