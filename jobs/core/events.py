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
    batch.paused        cause (disk-full | worker-stopped), reason (a line for the thread),
                        approach (disk-full: the configuration that runs again), host
    batch.resumed       cause, approach, after_s (seconds paused): the data dir has room again
    sweep.confirmation  confirmation (its batch), event (one event of the sweep's confirmation
                        batch, as above, without a report): the sweep batch's followers see
                        its confirmation run; the confirmation's batch.started has `confirms`
    bisect.part         part (its batch), stack, event (one event of a bisection's batch on
                        that stack, as above, without a report); a bisection's batch.started
                        has `bisect` (approach, from, to, stacks: those between)
                        (a regression watch's confirmation is relayed to its night's batch
                        the same way)

Sinks share one interface: the embedded in-process channel here, a Redis Stream in
distributed mode (`jobs/broker/streams.py`). A worker emits through a `MaskedSink`, so that no
event carries a secret of its environment or what a `${NAME}` reference resolved to
(docs/contracts.md "Secrets stay references"): whatever text an event quotes (a log line, an error)
reads ***.
"""

from __future__ import annotations

import datetime as dt
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from jobs.redaction import redact

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


class MaskedSink:
    """Passes every event on with each of `secrets` read *** in every text it holds."""

    def __init__(self, sink: EventSink, *, secrets: Sequence[str]) -> None:
        self._sink = sink
        self._secrets = tuple(secrets)

    def emit(self, event: Event) -> None:
        self._sink.emit(_masked(event, self._secrets) if self._secrets else event)


def _masked(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return redact(value, secrets=secrets)
    if isinstance(value, dict):
        return {_masked(k, secrets): _masked(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(v, secrets) for v in value]
    return value


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
