"""How the local engine starts a configuration's child: forked from a warm server, else fresh.

A fresh `python -m jobs.engines.local.child` spends seconds importing torch and transformers
before a second of work; a child forked from a server that has imported them starts in
milliseconds. Both are the same `ProcessGroup` to the engine: own pid, own session, the same log
lines, events and stop. The server is started on the first run (once per engine) with that
run's environment and serves every run with exactly that environment (a run with another one
gets a server of its own, replacing the first); when it cannot start, dies or does not answer,
the run starts a fresh process, so nothing waits on it. `SPECBENCH_LOCAL_FORKSERVER=0` turns it
off.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from jobs.engines.local.forked import PRELOAD, ForkedGroup, ForkServer, ForkUnavailable
from jobs.engines.procs import LineCallback, ProcessGroup

log = logging.getLogger(__name__)
SWITCH = "SPECBENCH_LOCAL_FORKSERVER"


def is_enabled() -> bool:
    return os.environ.get(SWITCH, "1").strip().lower() not in ("0", "false", "no", "off")


class Launcher:
    """Starts children for one engine; holds its fork server until `close`."""

    def __init__(self, *, fork: bool = True, modules: Sequence[str] = PRELOAD) -> None:
        self._fork = fork
        self._modules = tuple(modules)
        self._server: ForkServer | None = None
        self._lock = threading.Lock()
        self.forked = 0  # children forked, for the tests and the bench
        self.fresh = 0
        self.servers = 0  # fork servers started, for the tests

    def start(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str],
        log_path: Path,
        on_line: LineCallback,
        secrets: Sequence[str],
        should_stop: Callable[[], bool],
        wait_s: float,
    ) -> ProcessGroup:
        """The child's group: forked when the server can, else a fresh process."""
        with self._lock:
            server = self._server_for(env, secrets=secrets, should_stop=should_stop,
                                      wait_s=wait_s)
            if server is not None:
                try:
                    group = ForkedGroup(argv, server=server, env=env, log_path=log_path,
                                        on_line=on_line, secrets=secrets)
                except ForkUnavailable as exc:
                    log.warning("local engine: %s; starting a fresh process (server log: %s)",
                                exc, server.log_tail()[-500:])
                    self._drop()
                else:
                    self.forked += 1
                    return group
        self.fresh += 1
        return ProcessGroup(argv, env=env, log_path=log_path, on_line=on_line, secrets=secrets)

    def _server_for(
        self,
        env: dict[str, str],
        *,
        secrets: Sequence[str],
        should_stop: Callable[[], bool],
        wait_s: float,
    ) -> ForkServer | None:
        if not self._fork:
            return None
        current = self._server
        if current is not None and current.accepts(env) and current.is_alive():
            return current
        self._drop()
        try:
            server = ForkServer(env=env, modules=self._modules, secrets=secrets)
        except OSError as exc:
            log.warning("local engine: no fork server (%s); fresh processes from now on", exc)
            self._fork = False
            return None
        if not server.wait_ready(timeout_s=wait_s, should_stop=should_stop):
            if not should_stop():
                log.warning("local engine: the fork server did not start; fresh processes "
                            "from now on. Its log:\n%s", server.log_tail()[-2000:])
                self._fork = False  # it would fail again, and each run would wait for it
            server.close()
            return None
        self._server = server
        self.servers += 1
        return server

    def _drop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()

    def close(self) -> None:
        """Stop the fork server (if any); a later run starts a new one."""
        with self._lock:
            self._drop()
