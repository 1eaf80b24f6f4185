"""`ctxproxy serve --workers N`: a master process keeping N serving processes on one port.

Each worker is `python -m proxy serve --reuse-port` (a fresh interpreter, no state shared by fork)
listening with SO_REUSEPORT, so the kernel spreads connections over them and every core serves. The
store is shared: SQLite's WAL file (writes serialised by its lock) or PostgreSQL. A worker that dies is
replaced; SIGTERM or SIGINT stops them all and then the master.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType

RESPAWN_PAUSE_S = 1.0  # between a worker's death and its replacement (no busy loop on a bad config)


class _Master:
    def __init__(self, argv: Sequence[str], count: int) -> None:
        self.argv = [sys.executable, "-m", "proxy", "serve", *argv, "--reuse-port"]
        self.count = count
        self.workers: list[subprocess.Popen[bytes]] = []
        self.stopping = False

    def spawn(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.argv)

    def stop(self, signum: int, _frame: FrameType | None) -> None:
        self.stopping = True
        for worker in self.workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM if signum != signal.SIGINT else signal.SIGINT)

    def supervise(self) -> int:
        """Keep `count` workers alive until told to stop; then wait for every one of them."""
        self.workers = [self.spawn() for _ in range(self.count)]
        while not self.stopping:
            time.sleep(0.2)
            for i, worker in enumerate(self.workers):
                if worker.poll() is not None and not self.stopping:
                    print(f"ctxproxy: worker {worker.pid} exited ({worker.returncode}); starting another",
                          file=sys.stderr)
                    time.sleep(RESPAWN_PAUSE_S)
                    self.workers[i] = self.spawn()
        for worker in self.workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
        return 0


def run_workers(argv: Sequence[str], count: int) -> int:
    """Serve with `count` worker processes (`argv`: the serve options, minus --workers)."""
    master = _Master(argv, count)
    signal.signal(signal.SIGTERM, master.stop)
    signal.signal(signal.SIGINT, master.stop)
    print(f"ctxproxy master {count} workers", file=sys.stderr)
    return master.supervise()
