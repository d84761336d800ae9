"""The suite's `python -m bot.cli.main` and `python -m bot.slack.beat` processes, forked from a
warm interpreter instead of started cold.

A cold one spends about 0.45 CPU-s importing (SQLAlchemy, pydantic, Celery, our 280 modules)
before its command does anything, and the suite starts some 250. Each pytest worker keeps one
warm interpreter: the local engine's fork server (jobs/engines/local/forkserver.py) with
tests/warm_cli_modules.py imported. `WarmPopen`, which conftest.py puts in place of
`subprocess.Popen` for the session, asks it for the child when the command line is
`sys.executable -m MODULE ...` for a module in ROUTED and the process would start as the warm
interpreter did: the same PYTHON*, locale and TMPDIR variables; no shell, executable,
preexec_fn, pass_fds, close_fds=False, user, group, umask or process group; an existing
working directory. Anything else starts as usual, and so does a child the server could not be
asked for (gone, never started). Once asked, a failure is an error, never a second start.

The child is a process of its own, as a Popen child is: its pid, its exit code (-SIGNAL when
killed, and signals reach it as any process), the stdin, stdout and stderr Popen made for it,
exactly its environment and working directory, a session of its own with `start_new_session`,
a fresh `__main__` run by runpy as `python -m` runs it. What differs: its parent is the warm
interpreter, which reaps it and reports its exit; /proc/PID/cmdline and /proc/PID/environ show
the warm interpreter's; it dies with it (PR_SET_PDEATHSIG), at the end of the worker's session
at the latest. SPECBENCH_TEST_COLD=1 starts every process cold. tests/test_warm_cli.py holds
the child to what a cold one does.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from jobs.engines.local import forkserver
from jobs.engines.local.forked import ForkedProc

ROUTED = frozenset({"bot.cli.main", "bot.slack.beat"})
MODULES_LINE = "SPECBENCH-WARM-MODULES "  # tests/warm_cli_modules.py: where its modules came from
COLD = "SPECBENCH_TEST_COLD"
_KEYED = frozenset({"LANG", "LC_ALL", "LC_CTYPE", "TMPDIR"})
_AT_START = frozenset({"sitecustomize", "usercustomize"})  # what `site` runs as it starts
_START_S = 60.0
_REPLY_S = 30.0
_REPO = Path(__file__).resolve().parents[1]
_COLD_POPEN = subprocess.Popen
_BASE_ENV = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}


class Unavailable(Exception):
    """The warm interpreter cannot be asked for this child (nothing was sent to it)."""


def _key(env: Mapping[str, str]) -> dict[str, str]:
    """What the interpreter reads of its environment as it starts."""
    return {k: v for k, v in env.items() if k.startswith("PYTHON") or k in _KEYED}


class WarmInterpreter:
    """One worker's warm interpreter: the fork server's process, its socket, its control
    connection (whose close ends it)."""

    def __init__(self) -> None:
        self.env = dict(_BASE_ENV)
        self.modules: dict[str, str | None] = {}
        self.dir = tempfile.mkdtemp(prefix="specbench-warm-")
        self.path = os.path.join(self.dir, "socket")
        with open(os.path.join(self.dir, "server.log"), "wb") as log:
            self.proc = _COLD_POPEN(
                [sys.executable, "-m", "jobs.engines.local.forkserver", self.path,
                 "tests.warm_cli_modules"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=self.env,
                cwd=_REPO)
        self.control = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._wait_ready()
            self.control.connect(self.path)
        except BaseException:
            self.close()
            raise

    def _wait_ready(self) -> None:
        """Read its lines up to READY (os.read: no buffer that select() cannot see)."""
        assert self.proc.stdout is not None
        fd, pending = self.proc.stdout.fileno(), b""
        deadline = time.monotonic() + _START_S
        while time.monotonic() < deadline:
            if not select.select([fd], [], [], 0.5)[0]:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break  # it exited
            *lines, pending = (pending + chunk).split(b"\n")
            for line in map(bytes.decode, lines):
                if line.startswith(MODULES_LINE):
                    self.modules = json.loads(line.removeprefix(MODULES_LINE))
                if line.startswith(forkserver.READY):
                    return
        raise Unavailable(f"the warm interpreter did not start: {self.log_tail()}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def accepts(self, env: Mapping[str, str], cwd: str) -> bool:
        """Whether a cold interpreter with `env` in `cwd` would have imported what this one
        holds: the same variables it reads as it starts, but for PYTHONPATH folders (put first
        on sys.path) where none of its top-level modules could be found elsewhere, nor what
        `site` runs as an interpreter starts."""
        mine, theirs = _key(self.env), _key(env)
        if mine.pop("PYTHONPATH", "") or mine != {k: v for k, v in theirs.items()
                                                  if k != "PYTHONPATH"}:
            return False  # one started with a PYTHONPATH of its own takes only the same
        entries = theirs.get("PYTHONPATH", "")
        return not entries or not any(
            self._shadows(os.path.join(cwd, entry)) for entry in entries.split(os.pathsep))

    def _shadows(self, folder: str) -> bool:
        folder = os.path.abspath(folder)
        try:
            names = {name.split(".")[0] for name in os.listdir(folder)}
        except OSError:
            return False  # no folder: nothing found there by a cold one either
        return not names.isdisjoint(_AT_START) or any(
            name in self.modules and self.modules[name] not in (None, folder) for name in names)

    def spawn(self, request: dict[str, Any], fds: list[int]) -> tuple[int, socket.socket]:
        """The child's pid, and the connection its exit is reported on."""
        if not self.accepts(request["env"], request["cwd"]) or not self.alive():
            raise Unavailable("another interpreter environment, or the server is gone")
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            conn.connect(self.path)
        except OSError as exc:
            conn.close()
            raise Unavailable(str(exc)) from exc
        try:
            socket.send_fds(conn, [json.dumps(request).encode()], fds)
            conn.settimeout(_REPLY_S)
            pid = int(json.loads(conn.recv(4096))["pid"])
        except BaseException:
            conn.close()
            raise
        conn.settimeout(None)
        return pid, conn

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return Path(self.dir, "server.log").read_text(errors="replace")[-2000:]
        return ""

    def close(self) -> None:
        self.control.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)


_lock = threading.Lock()
_current: WarmInterpreter | None = None


def warm_interpreter() -> WarmInterpreter | None:
    """This worker's warm interpreter, started (again) when there is none alive."""
    global _current
    with _lock:
        if _current is not None and not _current.alive():
            _current.close()
            _current = None
        if _current is None:
            try:
                _current = WarmInterpreter()
            except Unavailable as exc:
                print(f"tests/warm_cli.py: starting cold: {exc}", file=sys.stderr)
                return None
        return _current


def _routed(args: Any, cwd: Any, env: Any, options: dict[str, Any]) -> list[str] | None:
    """The command line, when WarmPopen may ask the warm interpreter for it."""
    if os.environ.get(COLD) or isinstance(args, (str, bytes, os.PathLike)):
        return None
    argv = list(args)
    plain = (options["shell"], options["executable"], options["preexec_fn"],
             options["pass_fds"], options["gid"], options["gids"], options["uid"]) == (
        False, None, None, (), None, None, None)
    if not (plain and options["close_fds"] and options["umask"] < 0
            and options["process_group"] == -1):
        return None
    if len(argv) < 3 or argv[:2] != [sys.executable, "-m"] or argv[2] not in ROUTED:
        return None
    environ = os.environ if env is None else env
    strings = all(isinstance(item, str) for item in [*argv, *environ, *environ.values()])
    if not strings or (cwd is not None and not os.path.isdir(cwd)):
        return None
    return argv


def _status(code: int) -> int:
    """The wait status that `subprocess` turns back into `code`."""
    return code << 8 if code >= 0 else -code


class WarmPopen(subprocess.Popen):  # type: ignore[type-arg]
    """`subprocess.Popen`, whose child comes from the warm interpreter when it may."""

    _forked: ForkedProc | None = None

    def _execute_child(  # noqa: PLR0913 - Popen's own signature
        self, args: Any, executable: Any, preexec_fn: Any, close_fds: Any, pass_fds: Any,
        cwd: Any, env: Any, startupinfo: Any, creationflags: Any, shell: Any,
        p2cread: int, p2cwrite: int, c2pread: int, c2pwrite: int, errread: int,
        errwrite: int, restore_signals: Any, gid: Any, gids: Any, uid: Any, umask: Any,
        start_new_session: Any, process_group: Any,
    ) -> None:
        options = {"executable": executable, "preexec_fn": preexec_fn, "close_fds": close_fds,
                   "pass_fds": tuple(pass_fds), "shell": shell, "gid": gid, "gids": gids,
                   "uid": uid, "umask": umask, "process_group": process_group}
        argv = _routed(args, cwd, env, options)
        server = warm_interpreter() if argv is not None else None
        if server is not None:
            request = {"argv": argv, "env": dict(os.environ if env is None else env),
                       "cwd": os.path.abspath(os.fsdecode(cwd)) if cwd is not None
                       else os.getcwd(), "session": bool(start_new_session)}
            fds = [p2cread if p2cread != -1 else 0, c2pwrite if c2pwrite != -1 else 1,
                   errwrite if errwrite != -1 else 2]
            with contextlib.suppress(Unavailable):
                self.pid, conn = server.spawn(request, fds)
                # its exit as the server reports it (SIGKILL when the server died first)
                self._forked = ForkedProc(self.pid, conn=conn, read_fd=None)
                self._child_created = True
                self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)
                return
        super()._execute_child(  # type: ignore[misc]
            args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
            creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite,
            restore_signals, gid, gids, uid, umask, start_new_session, process_group)

    @property
    def _warm(self) -> bool:
        return self._forked is not None

    def _try_wait(self, wait_flags: int) -> tuple[int, int]:
        if self._forked is None:
            return super()._try_wait(wait_flags)  # type: ignore[misc,no-any-return]
        code = self._forked.poll() if wait_flags & os.WNOHANG else self._forked.wait()
        return (0, 0) if code is None else (self.pid, _status(code))

    def _internal_poll(self, _deadstate: int | None = None, **kwargs: Any) -> int | None:
        if self._forked is None:
            return super()._internal_poll(_deadstate, **kwargs)  # type: ignore[misc,no-any-return]
        if self.returncode is None:
            self.returncode = self._forked.poll()
        return self.returncode


@contextlib.contextmanager
def installed() -> Iterator[None]:
    """`subprocess.Popen` is WarmPopen while this lasts; the warm interpreter ends with it."""
    global _current
    subprocess.Popen = WarmPopen  # type: ignore[misc]
    try:
        yield
    finally:
        subprocess.Popen = _COLD_POPEN  # type: ignore[misc]
        with _lock:
            if _current is not None:
                _current.close()
                _current = None
