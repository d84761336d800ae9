"""The engine's side of the fork server: start it, ask it for a child, follow that child.

`ForkServer` starts `jobs.engines.local.forkserver` as a `ProcessGroup` (its own session,
registered like any server, so a dead worker's orphan cleanup kills it) with the environment
every child it forks will have, and holds a control connection whose close ends it.
`ForkedGroup` is a `ProcessGroup` whose child comes from the server instead of `Popen`; the
group's pid, log, registry entry, stop (SIGTERM, grace, SIGKILL) are the same. `ForkedProc` is
the `Popen` look-alike it holds: the exit status comes from the server, which reaps the child.

Errors: `ForkUnavailable` (the server cannot give this child) means "start a fresh process".
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from jobs.engines.local import forkserver
from jobs.engines.pids import is_alive
from jobs.engines.procs import Proc, ProcessGroup

# What a child of the local engine imports: seconds that every child skips. Not the child's
# own module: `-m` runs it afresh, as `python -m` would (runpy warns about a module imported).
PRELOAD = ("torch", "transformers", "transformers.models.llama.modeling_llama",
           "jobs.engines.local.model")
_REPLY_S = 10.0
# Set by pytest for each test, read by no library at import: a server started under one test may
# fork the children of the next (they still get it exactly, as every other variable).
_UNKEYED = frozenset({"PYTEST_CURRENT_TEST"})


class ForkUnavailable(Exception):
    """The fork server cannot start this child (gone, another environment, no answer)."""


class ForkServer:
    """A warm `forkserver` process; every child it forks gets exactly its environment."""

    def __init__(self, *, env: dict[str, str], modules: Sequence[str] = PRELOAD,
                 secrets: Sequence[str] = ()) -> None:
        self.env = dict(env)
        self._dir = Path(tempfile.mkdtemp(prefix="specbench-fork-"))
        self.path = str(self._dir / "socket")
        self._ready = threading.Event()
        self.control: socket.socket | None = None
        argv = [sys.executable, "-m", "jobs.engines.local.forkserver", self.path, *modules]
        try:
            self.group = ProcessGroup(argv, env=self.env, log_path=self._dir / "server.log",
                                      on_line=self._on_line, secrets=secrets)
        except BaseException:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise

    def _on_line(self, line: str) -> None:
        if line.startswith(forkserver.READY):
            self._ready.set()

    def wait_ready(self, *, timeout_s: float, should_stop: Callable[[], bool]) -> bool:
        """Wait until the server listens (its imports done); False when it exited, took longer
        than `timeout_s`, or a stop was asked for meanwhile."""
        deadline = time.monotonic() + timeout_s
        while not self._ready.wait(0.05):
            if self.group.poll() is not None or time.monotonic() > deadline or should_stop():
                return False
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            sock.connect(self.path)
        except OSError:
            sock.close()
            return False
        self.control = sock
        return True

    def accepts(self, env: dict[str, str]) -> bool:
        """Whether a child with `env` may come from this server: the same environment, since
        libraries read much of it at import (libgomp its OMP_NUM_THREADS, for one)."""
        return _keyed(env) == _keyed(self.env)

    def is_alive(self) -> bool:
        return self.control is not None and self.group.poll() is None

    def spawn(self, argv: Sequence[str], *, env: dict[str, str], cwd: str) -> ForkedProc:
        """Ask for a child running `argv` (`python -m ...` or `python -c ...`), its stdout and
        stderr on a new pipe; its pid leads its own session when this returns."""
        if not self.accepts(env) or not self.is_alive():
            raise ForkUnavailable("the fork server is gone or has another environment")
        read_fd, write_fd = os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            try:
                conn.connect(self.path)
                request = {"argv": list(argv), "env": env, "cwd": cwd}
                socket.send_fds(conn, [json.dumps(request).encode()], [write_fd])
            finally:
                os.close(write_fd)  # the child holds it now: EOF when it (and its own) exit
            conn.settimeout(_REPLY_S)  # not select(): a worker's fds may pass FD_SETSIZE
            reply = conn.recv(4096)
            if not reply:
                raise ForkUnavailable("the fork server did not answer")
            pid = int(json.loads(reply)["pid"])
        except (OSError, ValueError, KeyError) as exc:
            conn.close()
            os.close(read_fd)
            raise ForkUnavailable(f"the fork server failed: {exc}") from exc
        except BaseException:
            conn.close()
            os.close(read_fd)
            raise
        return ForkedProc(pid, conn=conn, read_fd=read_fd)

    def close(self) -> None:
        """End the server (closing the control connection is its signal), then its group."""
        if self.control is not None:
            self.control.close()
        deadline = time.monotonic() + 2.0
        while self.group.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        self.group.stop(grace_s=2.0)
        shutil.rmtree(self._dir, ignore_errors=True)

    def log_tail(self) -> str:
        return self.group.tail_text()


class ForkedProc:
    """A child of the fork server, seen as `subprocess.Popen`: pid, stdout, poll, wait. Without
    `read_fd` (the child was given descriptors of its own: tests/warm_cli.py), no stdout."""

    def __init__(self, pid: int, *, conn: socket.socket, read_fd: int | None) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.stdout: IO[str] | None = None if read_fd is None else open(  # noqa: SIM115
            read_fd, encoding="utf-8", errors="replace")  # closed by the group's reader
        self._conn: socket.socket | None = conn
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        with self._lock:
            if self.returncode is None:
                self._check(timeout=0.0)
            return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(["forked", str(self.pid)], timeout or 0.0)
            time.sleep(0.02 if left is None else min(0.02, left))
        return code

    def _check(self, *, timeout: float) -> None:
        """Read the server's exit report if one has come (0: do not wait)."""
        if self._conn is not None:
            self._conn.settimeout(timeout)
            try:
                reply: dict[str, Any] = json.loads(self._conn.recv(4096) or b"{}")
            except (TimeoutError, BlockingIOError):
                return  # still running
            except (OSError, ValueError):
                reply = {}
            self._conn.close()
            self._conn = None
            if "exit" in reply:
                self.returncode = int(reply["exit"])
                return
        # The server died without reaping it: the child got SIGKILL (PR_SET_PDEATHSIG).
        if not is_alive(self.pid):
            self.returncode = -signal.SIGKILL


class ForkedGroup(ProcessGroup):
    """A `ProcessGroup` whose child the fork server forks (see the module's docstring)."""

    def __init__(self, argv: Sequence[str], *, server: ForkServer, **kwargs: Any) -> None:
        self._server = server
        super().__init__(argv, **kwargs)

    def _spawn(self, *, env: dict[str, str], cwd: Path | None) -> Proc:
        return self._server.spawn(self.argv, env=env, cwd=str(cwd or os.getcwd()))


def _keyed(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in _UNKEYED}
