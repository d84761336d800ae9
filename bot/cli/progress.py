"""The command line's progress on stderr: approach, phase, repetition, elapsed time.

On a terminal one line is redrawn in place, and each finished bench pass (the warm-up, every
repetition, with its value and unit) stays as a line of its own; otherwise each change is a
plain line. The words are `jobs.core.progress`'s, the same as the chat thread's. A sweep's
confirmation runs inside its sweep batch: its lines follow, prefixed "confirmation". With load
levels each phase names its level: `2/3 eagle3: level 2/4 max-concurrency 4 · rep 1/3`.
"""

from __future__ import annotations

import threading
import time
from typing import TextIO

from jobs.core.events import Event
from jobs.core.progress import outcome_text, phase_text, started_text
from jobs.core.units import plural


class ProgressBar:
    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._tty = bool(getattr(stream, "isatty", lambda: False)())
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._width = 0
        self._levels: dict[str, Event] = {}  # each approach's latest `level` phase

    def on_event(self, event: Event) -> None:
        prefix = ""
        if event["type"] == "sweep.confirmation" and isinstance(event.get("event"), dict):
            event, prefix = event["event"], "confirmation "  # the sweep's, run inline
        elif event["type"] == "bisect.part" and isinstance(event.get("event"), dict):
            event, prefix = event["event"], f"{event.get('stack')}: "  # a bisection's part
        if event["type"] == "approach.phase" and event.get("phase") == "level":
            self._levels[f"{prefix}{event.get('approach')}"] = event
        line = self._describe(event, self._levels.get(f"{prefix}{event.get('approach')}"))
        if line is None:
            return
        # A finished bench pass (and a refused preflight) stays on a terminal: the other
        # phases are redrawn in place by the next one.
        final = event["type"] in ("approach.finished", "batch.started", "batch.finished",
                                  "batch.cancelled", "batch.paused", "batch.resumed") or (
            event["type"] == "approach.phase"
            and (event.get("phase") == "result" or bool(event.get("error"))))
        self._write(prefix + line, final=final)

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
    def _describe(event: Event, level: Event | None = None) -> str | None:
        kind = event["type"]
        if kind == "batch.started" and isinstance(event.get("bisect"), dict):
            asked = event["bisect"]
            return (f"batch {event['batch']} ({event.get('preset')}) started on "
                    f"{event.get('host')}: bisecting {asked.get('approach')} from "
                    f"{asked.get('from')} to {asked.get('to')} over "
                    f"{plural(len(asked.get('stacks') or []), 'stack')} between them")
        if kind == "batch.started":
            return (f"batch {event['batch']} ({event.get('preset')}) started on "
                    f"{event.get('host')}: "
                    f"{plural(len(event.get('approaches', [])), 'configuration')}, "
                    f"{started_text(event)}")
        if kind == "approach.phase":
            return f"{event['index']}/{event['of']} {event['approach']}: {phase_text(event, level)}"
        if kind == "approach.finished":
            return f"{event['index']}/{event['of']} {event['approach']}: " + outcome_text(event)
        if kind in ("batch.finished", "batch.cancelled"):
            return f"batch {event['batch']} {event.get('state')}"
        if kind == "batch.paused":
            return f"batch {event['batch']} paused: {event.get('reason')}"
        if kind == "batch.resumed":
            return f"batch {event['batch']} resumed after {event.get('after_s')} s"
        return None
