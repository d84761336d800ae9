"""Progress events: what a batch tells the chat surfaces while it runs.

An event is a flat JSON object: `{"type": ..., "batch": ..., "at": ISO time, ...}`. Types:

    batch.queued        queue, position (1 = next), preset, approaches (names)
    batch.started       host, queue, approaches, reps, warmup (bool), metric, warnings
    approach.phase      approach, index (1-based), of, phase (preflight | launching | ready |
                        warmup | repetition | result | stopping); reps for `warmup`; rep and
                        reps for `repetition`; after each bench pass `result`: rep (0 for the
                        warm-up), reps, metric, value (None without one), warmup (True for
                        the warm-up, which is never a sample), why (a repetition no sample)
    approach.finished   approach, index, of, status, verdict, value, delta_pct, cause, why,
                        metric (the value's, for its unit)
    batch.finished      state (done | failed | refused), report (SPEC's report; None when
                        failed or refused), error (why, when failed or refused)
    batch.cancelled     report (the partial report)

Sinks share one interface: the embedded in-process channel here, a Redis Stream in
distributed mode (`jobs/broker/streams.py`).
"""

from __future__ import annotations

import datetime as dt
import queue
import threading
from collections.abc import Callable
from typing import Any, Protocol

Event = dict[str, Any]


class EventSink(Protocol):
    def emit(self, event: Event) -> None: ...


def make_event(kind: str, batch: str, **fields: Any) -> Event:
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {"type": kind, "batch": batch, "at": stamp, **fields}


class NullSink:
    def emit(self, event: Event) -> None:
        return None


class CallbackSink:
    """Calls a function for every event (the CLI's progress bar)."""

    def __init__(self, callback: Callable[[Event], None]) -> None:
        self._callback = callback

    def emit(self, event: Event) -> None:
        self._callback(event)


class LocalChannel:
    """The embedded mode's channel: in-process, ordered, one queue per subscriber."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: list[queue.Queue[Event]] = []

    def emit(self, event: Event) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            subscriber.put(event)

    def subscribe(self) -> queue.Queue[Event]:
        inbox: queue.Queue[Event] = queue.Queue()
        with self._lock:
            self._subscribers.append(inbox)
        return inbox

    def unsubscribe(self, inbox: queue.Queue[Event]) -> None:
        with self._lock:
            if inbox in self._subscribers:
                self._subscribers.remove(inbox)
