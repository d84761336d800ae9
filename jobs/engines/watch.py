"""The watcher of a served engine's server: every log line against the failure rules (a fatal
line ends the run at once; fallback lines are kept), and `/health` polled until it answers."""

from __future__ import annotations

import logging
import re
import threading
import time
import urllib.error
import urllib.request
from collections import deque

from jobs.core.rules import Match, RuleSet

log = logging.getLogger(__name__)

HEALTH_EVERY_S = 0.2
_CONTEXT_LINES = 20
MAX_FALLBACKS = 10
# A rank's log prefix, so that one line logged by eight ranks is kept once: "[time TPn] " or
# "(Worker rank=1 pid=5) WARNING 12-04 09:00:00 [file.py:141] ".
_PREFIX = re.compile(
    r"^(?:\([^)]*\)\s*)?(?:(?:DEBUG|INFO|WARNING|ERROR) \S+ \S+ )?\[[^\]]*\]\s*"
)


class LogWatch:
    """Reads the server's log lines and polls /health; sets `event` on anything that matters."""

    def __init__(self, rules: RuleSet, port: int, ready_line: str | None) -> None:
        self.rules = rules
        self.port = port
        self.ready_line = ready_line
        self.event = threading.Event()
        self.fatal: Match | None = None
        self.fatal_at: float | None = None
        self.fallbacks: list[str] = []  # lines where the server fell back, seen live
        self.ready = False
        self._previous: deque[str] = deque(maxlen=_CONTEXT_LINES)
        self._closed = threading.Event()
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def on_line(self, line: str) -> None:
        try:
            if self.fatal is None:
                match = self.rules.fatal_match(line, tuple(self._previous))
                if match is not None:
                    self.fatal, self.fatal_at = match, time.monotonic()
                    self.event.set()
            if self.ready_line is not None and self.ready_line in line:
                self.ready = True
                self.event.set()
            fell_back = self.rules.fallback_match(line)
            if fell_back is not None and len(self.fallbacks) < MAX_FALLBACKS:
                text = _PREFIX.sub("", fell_back.line)  # one line for the eight ranks
                if all(_PREFIX.sub("", seen) != text for seen in self.fallbacks):
                    self.fallbacks.append(fell_back.line)
        except Exception:  # the log pump must keep draining the pipe whatever happens
            log.exception("log watcher failed on %r", line)
        self._previous.append(line)

    def poll_health(self) -> None:
        url = f"http://127.0.0.1:{self.port}/health"
        while not self._closed.wait(HEALTH_EVERY_S) and not self.ready:
            try:
                with self.opener.open(url, timeout=2.0) as response:
                    if response.status == 200:
                        self.ready = True
                        self.event.set()
            except (OSError, urllib.error.URLError, ValueError):
                pass

    def close(self) -> None:
        self._closed.set()
