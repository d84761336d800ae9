"""A redis-server of a test's own, on a free port, that the test may kill and start again.

No persistence (as a crashed Redis without AOF): a restarted server is empty. Skipped where no
`redis-server` is on PATH.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis

from jobs.engines.procs import free_port


class RedisServer:
    """`redis-server --port P` with its log in `root`; `kill` (SIGKILL) and `start` again on the
    same port."""

    def __init__(self, root: Path, *, port: int | None = None) -> None:
        if shutil.which("redis-server") is None:
            pytest.skip("no redis-server on PATH")
        self.root = root
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        with open(self.root / f"redis-{self.port}.log", "a") as log:
            self.proc = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no"], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not self.answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on {self.port} did not answer")
            time.sleep(0.05)

    def answers(self) -> bool:
        try:
            return bool(redis.Redis(port=self.port, socket_connect_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5, socket_connect_timeout=5)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
