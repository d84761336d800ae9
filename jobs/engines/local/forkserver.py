"""The local engine's fork server: torch and transformers imported once, a child forked per run.

`python -m jobs.engines.local.forkserver SOCKET [MODULE ...]` imports the modules named (import
only: no torch op runs here, so no intra-op thread pool exists when it forks), listens on a unix
socket (SOCK_SEQPACKET: one message per request) and prints `READY` once. Each request carries a
command line (`python -m MODULE ARGS` or `python -c CODE ARGS`), its environment and its working
directory, with its file descriptors: one (the write end of the pipe the engine reads: stdout
and stderr) or three (stdin, stdout and stderr, as a `subprocess.Popen` of the suite's passes
them: tests/warm_cli.py). The server forks; the child becomes a session leader (its pid is its
process group, as with `start_new_session`; with `"session": false` in the request it stays in
the server's group, as a Popen child stays in its parent's), dies with the server
(PR_SET_PDEATHSIG), takes the descriptors, the environment and directory as its own, and runs
the command as `python` would. The server answers `{"pid": N}` once the child has done so,
`{"exit": CODE}` (Popen's returncode: -SIGNAL when killed) once it has reaped it.

It exits when its first connection (the engine's control connection) closes, when its parent
process is gone, or after IDLE_S without a child; a child still running then is SIGKILLed with
its group. Its own children otherwise outlive nothing: each dies when the server dies.
"""

from __future__ import annotations

import atexit
import builtins
import ctypes
import importlib
import json
import os
import random
import runpy
import select
import shutil
import signal
import socket
import sys
import time
import traceback
import types
from collections.abc import Mapping
from typing import Any

from jobs.startup import pause_collector, resume_collector

READY = "SPECBENCH-FORKSERVER ready"
IDLE_S = 300.0
_POLL_S = 0.2
_PR_SET_PDEATHSIG = 1
_MAX_MESSAGE = 1 << 20


class Server:
    """The accept-fork-reap loop; its state is the sockets and the children it forked."""

    def __init__(self, path: str) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(path)
        self.listener.listen(64)
        self.parent = os.getppid()
        self.python_path = _python_path(os.environ)  # its own, after sys.path[0]
        self.control: socket.socket | None = None
        self.idle: list[socket.socket] = []  # connections that have not sent a request yet
        self.children: dict[int, socket.socket] = {}  # pid -> the connection that asked for it
        self.last_active = time.monotonic()
        # A child's exit wakes the loop at once (its engine is polling for the exit status).
        self.wakeup_r, self.wakeup_w = socket.socketpair()
        self.wakeup_w.setblocking(False)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.set_wakeup_fd(self.wakeup_w.fileno())

    def serve(self) -> None:
        try:
            while self._should_run():
                inputs = [self.listener, *self._inputs(), self.wakeup_r]
                ready, _, _ = select.select(inputs, [], [], _POLL_S)
                for sock in ready:
                    if sock is self.wakeup_r:
                        self.wakeup_r.recv(4096)
                    else:
                        self._on_readable(sock)
                self._reap()
        finally:
            for pid in self.children:
                _killpg(pid)
            self._reap()

    def _should_run(self) -> bool:
        if os.getppid() != self.parent:
            return False  # the engine's process died: nothing will ask again
        if self.children:
            self.last_active = time.monotonic()
        return time.monotonic() - self.last_active < IDLE_S

    def _inputs(self) -> list[socket.socket]:
        return [*([self.control] if self.control else []), *self.idle]

    def _on_readable(self, sock: socket.socket) -> None:
        if sock is self.listener:
            conn, _ = self.listener.accept()
            if self.control is None:
                self.control = conn  # the engine's: its close ends the server
            else:
                self.idle.append(conn)
            return
        message, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, 4)
        if sock is self.control:
            for fd in fds:
                os.close(fd)
            if not message:
                raise SystemExit(0)  # the engine is done, or its process died
            return
        self.idle.remove(sock)
        if not message or len(fds) not in (1, 3):
            for fd in fds:
                os.close(fd)
            sock.close()
            return
        self.last_active = time.monotonic()
        self._fork(json.loads(message), fds=fds, conn=sock)

    def _fork(self, request: dict[str, Any], *, fds: list[int], conn: socket.socket) -> None:
        sync_r, sync_w = os.pipe()
        server = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(sync_r)
            signal.set_wakeup_fd(-1)  # a fresh interpreter's SIGCHLD: default, no wake-up fd
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            self.wakeup_r.close()
            self.wakeup_w.close()
            self._close_all()
            _child(request, fds=fds, sync_w=sync_w, server=server, server_path=self.python_path)
        os.close(sync_w)
        for fd in fds:
            os.close(fd)
        select.select([sync_r], [], [], 10.0)  # the child leads its session (or died trying)
        os.close(sync_r)
        self.children[pid] = conn
        conn.send(json.dumps({"pid": pid}).encode())

    def _close_all(self) -> None:
        for sock in [self.listener, *self._inputs(), *self.children.values()]:
            sock.close()

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is not None:
                try:
                    conn.send(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
                except OSError:
                    pass  # the engine no longer listens
                conn.close()


def _child(request: dict[str, Any], *, fds: list[int], sync_w: int, server: int,
           server_path: list[str]) -> None:
    """In the forked child: become what a fresh `python` started by the engine would be, run
    the command, exit with its status. Never returns."""
    code = 1
    try:
        if request.get("session", True):
            os.setsid()
        _die_with_parent()
        os.write(sync_w, b"1")
        os.close(sync_w)
        if os.getppid() != server:
            os._exit(1)  # the server died before PR_SET_PDEATHSIG took
        # One descriptor: stdout and stderr; three: stdin, stdout and stderr.
        targets, sources = ((1, 2), fds * 2) if len(fds) == 1 else ((0, 1, 2), fds)
        for target, fd in zip(targets, sources, strict=True):
            os.dup2(fd, target)
        for fd in set(fds) - {0, 1, 2}:
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        _fresh_path(request["env"], server_path)
        _fresh_streams(request["env"])
        random.seed()  # from os.urandom, as a fresh interpreter's is, not the server's state
        code = run_argv(request["argv"])
        atexit._run_exitfuncs()  # what a fresh interpreter runs on its way out
    except BaseException:  # noqa: BLE001 - nothing may return into the server's loop
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def _python_path(env: Mapping[str, str]) -> list[str]:
    """PYTHONPATH's entries as the interpreter puts them on sys.path (absolute, from the working
    directory; an empty one is the working directory)."""
    value = env.get("PYTHONPATH", "")
    return [os.path.abspath(entry) for entry in value.split(os.pathsep)] if value else []


def _fresh_path(env: dict[str, str], server_path: list[str]) -> None:
    """The child's PYTHONPATH entries in place of the server's (`server_path`), where a fresh
    interpreter puts them: right after sys.path[0]."""
    if sys.path[1:1 + len(server_path)] == server_path:
        sys.path[1:1 + len(server_path)] = _python_path(env)


def _fresh_streams(env: dict[str, str]) -> None:
    """stdout as a fresh interpreter opens it on the descriptor it now has: line-buffered on a
    terminal, written through under PYTHONUNBUFFERED (stderr is line-buffered either way)."""
    sys.stdout.reconfigure(line_buffering=os.isatty(1),  # type: ignore[union-attr]
                           write_through=bool(env.get("PYTHONUNBUFFERED")))


def run_argv(argv: list[str]) -> int:
    """Run `python -m MODULE ARGS` or `python -c CODE ARGS` in this interpreter as `python`
    would: in a fresh `__main__`, through runpy's own entry for -m, a traceback from the same
    frame on, the same exit code (SystemExit's, 1 after an exception)."""
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    try:
        if argv[1] == "-m":
            sys.argv = ["-m", *argv[3:]]
            sys.path[0] = os.getcwd()  # what `python -m` puts first: its directory
            sys.modules.pop(argv[2], None)  # run afresh, as `-m` does, even if imported here
            runpy._run_module_as_main(argv[2], alter_argv=True)  # type: ignore[attr-defined]
        elif argv[1] == "-c":
            sys.argv = ["-c", *argv[3:]]
            sys.path[0] = ""  # what `python -c` puts first: the working directory, as it is
            exec(compile(argv[2], "<string>", "exec"), main.__dict__)  # noqa: S102
        else:
            raise ValueError(f"the fork server runs `-m MODULE` or `-c CODE`, not {argv[1:2]}")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException as exc:  # noqa: BLE001 - as the interpreter's own excepthook would
        tb = exc.__traceback__
        traceback.print_exception(type(exc), exc, tb.tb_next if tb else None)  # not this frame
        return 1
    return 0


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def main(argv: list[str]) -> int:
    path, modules = argv[0], argv[1:]
    pause_collector(resume_after_s=None)
    for module in modules:
        importlib.import_module(module)
    resume_collector()  # before the first fork: each child runs with it, as usual
    server = Server(path)
    print(READY, flush=True)
    try:
        server.serve()
    finally:
        # Its folder (the socket, the log) goes with it: an engine that died cannot remove it,
        # and one that closes it has the log's tail in memory.
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
