"""Process trees: every server or measurement runs in its own process group, logged to a file.

A crash, a hang and a cancel all end the same way: SIGTERM to the whole group, a grace period,
SIGKILL, then a wait until no member of the group is left (zombies aside) and the port is free.

A worker may name a registry folder (`set_registry`): every group started then leaves a
`pg-<pgid>.json` there until it is stopped, so that a worker restarted after a kill -9 can find
and kill the servers its dead predecessor left running (`kill_orphans`).
"""

from __future__ import annotations

import collections
import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from jobs import settings

LineCallback = Callable[[str], None]
_registry: Path | None = None
log = logging.getLogger(__name__)
TAIL_LINES = 200


def set_registry(folder: Path | None) -> None:
    """Record every group started from now on in `folder` (None: stop recording)."""
    global _registry
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    _registry = folder


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields from the state on (field 3 is [0]); None: no such process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """When the process started, in clock ticks since boot (/proc/PID/stat field 22); None
    when it is gone or a zombie: with the pid, it names one process across pid reuse."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def is_alive(pid: int, *, started: int | None = None) -> bool:
    """Whether `pid` runs (a zombie is dead); with `started` (see `start_time`), whether it is
    still that same process."""
    fields = _stat_fields(pid)
    if fields is None:
        try:
            os.kill(pid, 0)  # no /proc to read: ask the kernel
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if not fields or fields[0] in ("Z", "X"):
        return False
    return started is None or (len(fields) > 19 and int(fields[19]) == started)


def kill_orphans(folder: Path) -> list[int]:
    """SIGKILL every registered group whose owner process is dead; the groups killed.

    A group whose owner is alive belongs to a running worker and is left alone; an owner that
    is a zombie (killed, not yet reaped) or whose pid now names another process is dead.
    """
    killed: list[int] = []
    if not folder.is_dir():
        return killed
    for entry in sorted(folder.glob("pg-*.json")):
        try:
            info = json.loads(entry.read_text(encoding="utf-8"))
            pgid, owner = int(info["pgid"]), int(info["owner"])
            started = info.get("owner_started")
            started = int(started) if started is not None else None
        except (OSError, ValueError, KeyError, TypeError):
            entry.unlink(missing_ok=True)
            continue
        mine = owner == os.getpid() and started in (None, start_time(owner))
        if mine and group_members(pgid):
            continue  # one of ours, still running
        if not mine and is_alive(owner, started=started):
            continue
        if group_members(pgid):
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline and group_members(pgid):
                time.sleep(0.05)
            killed.append(pgid)
        entry.unlink(missing_ok=True)
    return killed


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def is_port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is `pgid`, read from /proc."""
    members: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry))
    return members


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
        # of the child's environment (SPEC.md: by name, see settings.secret_values) nor any
        # of `secrets` (what its `${NAME}` references resolved to: base.server_env).
        self._secrets = tuple({*settings.secret_values(env), *secrets})
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self._on_line = on_line
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log: IO[str] = open(log_path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115
        self.started_at = time.monotonic()
        try:
            self.proc = subprocess.Popen(
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

    def _register(self) -> Path | None:
        if _registry is None:
            return None
        entry = _registry / f"pg-{self.pgid}.json"
        info = {"pgid": self.pgid, "owner": os.getpid(), "owner_started": start_time(os.getpid()),
                "argv": self.argv,
                "log": str(self.log_path), "started": time.time()}
        try:
            entry.write_text(json.dumps(info), encoding="utf-8")
        except OSError:
            return None
        return entry

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        # Whatever fails here, keep draining the pipe: a child blocked on a full pipe hangs.
        for raw in self.proc.stdout:
            line = raw.rstrip("\n")
            if self._secrets:
                line = settings.redact(line, secrets=self._secrets)
            self.tail.append(line)
            try:
                self._log.write(line + "\n")
                self._log.flush()
            except ValueError:
                pass  # closed by stop() while an escaped descendant still holds the pipe
            if self._on_line is not None:
                try:
                    self._on_line(line)
                except Exception:
                    log.exception("line callback failed on %r", line)
        self.proc.stdout.close()

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait_output(self, timeout: float = 5.0) -> None:
        """Let the reader drain what the child wrote before it exited."""
        self._reader.join(timeout)

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
        self._log.close()
        if self._registered is not None and not self._alive():
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
        return bool(group_members(self.pgid))
