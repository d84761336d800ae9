"""The command line's progress on stderr: approach, phase, repetition, elapsed time.

On a terminal one line is redrawn in place; otherwise each change is a plain line.
"""

from __future__ import annotations

import threading
import time
from typing import Any, TextIO

from jobs.core.events import Event


class ProgressBar:
    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._tty = bool(getattr(stream, "isatty", lambda: False)())
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._width = 0

    def on_event(self, event: Event) -> None:
        line = self._describe(event)
        if line is None:
            return
        final = event["type"] in ("approach.finished", "batch.started", "batch.finished",
                                  "batch.cancelled")
        self._write(line, final=final)

    def note(self, text: str) -> None:
        self._write(text, final=True)

    def close(self) -> None:
        with self._lock:
            if self._tty and self._width:
                self._stream.write("\n")
                self._width = 0
            self._stream.flush()

    def _write(self, line: str, *, final: bool) -> None:
        elapsed = time.monotonic() - self._started
        text = f"[{elapsed:6.1f}s] {line}"
        with self._lock:
            if self._tty:
                pad = max(self._width - len(text), 0)
                self._stream.write("\r" + text + " " * pad + ("\n" if final else ""))
                self._width = 0 if final else len(text)
            else:
                self._stream.write(text + "\n")
            self._stream.flush()

    @staticmethod
    def _describe(event: Event) -> str | None:
        kind = event["type"]
        if kind == "batch.started":
            return (f"batch {event['batch']} ({event.get('preset')}) started on "
                    f"{event.get('host')}: {len(event.get('approaches', []))} configurations, "
                    f"{event.get('reps')} reps each")
        if kind == "approach.phase":
            where = f"{event['index']}/{event['of']} {event['approach']}"
            phase = event["phase"]
            if phase == "repetition":
                return f"{where}: repetition {event.get('rep')} of {event.get('reps')}"
            if event.get("error"):
                return f"{where}: {phase} failed: {event['error']}"
            return f"{where}: {phase}"
        if kind == "approach.finished":
            return f"{event['index']}/{event['of']} {event['approach']}: " + _outcome(event)
        if kind in ("batch.finished", "batch.cancelled"):
            return f"batch {event['batch']} {event.get('state')}"
        return None


def _outcome(event: dict[str, Any]) -> str:
    verdict = event.get("verdict") or event.get("status")
    value = event.get("value")
    delta = event.get("delta_pct")
    parts = [str(verdict)]
    if value is not None:
        parts.append(f"{value:.4g}")
    if delta is not None:
        parts.append(f"({delta:+.1f}%)")
    if event.get("cause"):
        parts.append(f"[{event['cause']}]")
    return " ".join(parts)
