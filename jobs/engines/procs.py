"""Process trees: every server or measurement runs in its own process group, logged to a file.

A crash, a hang and a cancel all end the same way: SIGTERM to the whole group, a grace period,
SIGKILL, then a wait until no member of the group is left (zombies aside) and the port is free.

Every group started leaves a `pg-<pgid>.json` in a registry folder until it is stopped
(`jobs.engines.orphans`: a worker names its folder, other processes use the data dir's
`run/embedded`), so that the servers a process killed with -9 left running can be found and
killed (`kill_orphans`). `kill_live_groups` SIGKILLs every group this process still runs: the
last step of a process that is told to stop and must leave nothing behind.
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Protocol

from jobs import redaction
from jobs.engines import orphans
from jobs.engines.orphans import kill_orphans as kill_orphans
from jobs.engines.orphans import set_registry as set_registry
from jobs.engines.pids import group_alive
from jobs.engines.pids import group_members as group_members
from jobs.engines.pids import is_alive as is_alive
from jobs.engines.pids import start_time as start_time

LineCallback = Callable[[str], None]
log = logging.getLogger(__name__)
TAIL_LINES = 200
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
_live: set[ProcessGroup] = set()  # the groups this process started and has not stopped
_live_lock = threading.Lock()


def kill_live_groups() -> list[int]:
    """SIGKILL every group this process started and has not stopped yet, and wait until each
    is gone; their pgids. Their owners' `stop` then finds them dead and tidies up."""
    with _live_lock:
        groups = list(_live)
    for group in groups:
        orphans.kill_group(group.pgid)
    return [group.pgid for group in groups]


_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST_PORT = 10_000  # below: the well-known and registered services' (PostgreSQL, Redis...)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, for a server that binds it later.

    It is picked below the kernel's ephemeral range when that leaves room: the kernel hands the
    ports of that range to any process that binds port 0 or opens a connection, and a server
    binds its port seconds after it is picked (one picked by the kernel was taken so on a busy
    machine, and the server could not start). Otherwise, the kernel's own choice."""
    floor = _ephemeral_floor()
    if floor - _LOWEST_PORT >= 1_000:
        pick = random.SystemRandom()
        for _ in range(64):
            port = pick.randrange(_LOWEST_PORT, floor)
            if is_port_free(port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ephemeral_floor() -> int:
    """The lowest port of the kernel's ephemeral range (Linux's default: 32768); 0 unknown."""
    try:
        return int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def is_port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class Proc(Protocol):
    """What a group needs of its child process: `subprocess.Popen` or a look-alike."""

    pid: int
    returncode: int | None
    stdout: IO[str] | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class ProcessGroup:
    """A child started in a new session; its output goes line by line, the secrets of its
    environment masked, to a log and a callback."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str],
        log_path: Path,
        on_line: LineCallback | None = None,
        cwd: Path | None = None,
        secrets: Sequence[str] = (),
    ) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        # Masked at the source: the log file, the tail and the callback never see a secret
        # of the child's environment (docs/contracts.md: by name, see redaction.secret_values) nor
        # any of `secrets` (what its `${NAME}` references resolved to: base.server_env).
        self._secrets = tuple({*redaction.secret_values(env), *secrets})
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        # The first error writing the log (a full disk: ENOSPC): the output is still read,
        # kept in the tail and passed on, but the log file lacks it from there on.
        self.write_error: OSError | None = None
        self._on_line = on_line
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log: IO[str] = open(log_path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115
        self.started_at = time.monotonic()
        try:
            self.proc: Proc = self._spawn(env=env, cwd=cwd)
        except BaseException:
            self._log.close()  # a missing executable must not leak the log file
            raise
        self.pgid = self.proc.pid
        try:
            self._registered = self._register()
            self._reader = threading.Thread(
                target=self._pump, name=f"log-{self.pgid}", daemon=True
            )
            self._reader.start()
        except BaseException:
            self._signal(signal.SIGKILL)  # nothing would hold a handle on it otherwise
            self._log.close()
            raise

    def _spawn(self, *, env: dict[str, str], cwd: Path | None) -> Proc:
        """Start the child, its own session leader, stdout and stderr on one text pipe. A
        subclass may start it another way (the local engine forks it from a warm process):
        the group's pid must be the session's by the time this returns."""
        return subprocess.Popen(
            self.argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
        )

    def _register(self) -> Path | None:
        with _live_lock:
            _live.add(self)
        argv = [redaction.redact(arg, secrets=self._secrets) for arg in self.argv]
        return orphans.register(pgid=self.pgid, argv=argv, log_path=self.log_path)

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        # Whatever fails here, keep draining the pipe: a child blocked on a full pipe hangs.
        for raw in self.proc.stdout:
            line = raw.rstrip("\n")
            if self._secrets:
                line = redaction.redact(line, secrets=self._secrets)
            self.tail.append(line)
            if self.write_error is None:
                try:
                    self._log.write(line + "\n")
                    self._log.flush()
                except ValueError:
                    pass  # closed by stop() while an escaped descendant still holds the pipe
                except OSError as exc:
                    self.write_error = exc
                    log.error("cannot write %s (%s); its output is kept in memory only",
                              self.log_path, exc)
            if self._on_line is not None:
                try:
                    self._on_line(line)
                except Exception:
                    log.exception("line callback failed on %r", line)
        self.proc.stdout.close()

    def poll(self) -> int | None:
        return self.proc.poll()

    def no_space_error(self) -> OSError | None:
        """The error that kept its log from being written when it was a full disk (ENOSPC, or
        a quota's EDQUOT): what it ran for is lost with it."""
        error = self.write_error
        return error if error is not None and error.errno in NO_SPACE else None

    def wait_output(self, timeout: float = 5.0) -> None:
        """Let the reader drain what the child wrote before it exited."""
        self._reader.join(timeout)

    def last_lines(self, count: int, *, wait_s: float = 1.0) -> list[str]:
        """Its last `count` non-blank lines, once its output has been read (up to `wait_s`)."""
        self.wait_output(wait_s)
        return [line for line in self.tail if line.strip()][-count:]

    def tail_text(self) -> str:
        return "\n".join(self.tail)

    def stop(self, *, grace_s: float = 5.0, port: int | None = None) -> float:
        """SIGTERM the group, SIGKILL after `grace_s`, wait until it is gone; seconds it took."""
        begun = time.monotonic()
        self._signal(signal.SIGTERM)
        deadline = begun + grace_s
        while time.monotonic() < deadline and self._alive():
            time.sleep(0.05)
        if self._alive():
            self._signal(signal.SIGKILL)
            kill_deadline = time.monotonic() + 10.0
            while time.monotonic() < kill_deadline and self._alive():
                time.sleep(0.05)
        self._reap()
        if port is not None:
            port_deadline = time.monotonic() + 10.0
            while time.monotonic() < port_deadline and not is_port_free(port):
                time.sleep(0.05)
        self.wait_output(2.0)
        try:
            self._log.close()  # a full disk fails the last flush: the group is stopped anyway
        except OSError as exc:
            self.write_error = self.write_error or exc
        if not self._alive():
            with _live_lock:
                _live.discard(self)
            if self._registered is not None:
                self._registered.unlink(missing_ok=True)
        return time.monotonic() - begun

    def _signal(self, signum: int) -> None:
        try:
            os.killpg(self.pgid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def _reap(self) -> None:
        try:
            self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass

    def _alive(self) -> bool:
        self.proc.poll()
        return group_alive(self.pgid)
