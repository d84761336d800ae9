"""The event sink a worker (and the distributed dispatcher) emits to: the Redis Stream, without
ever making the caller wait for Redis.

`StreamSink.emit` puts the event in a queue and returns at once; one publisher thread per sink
sends the queue in order (XADD). A measurement never waits on an event: with Redis away, a
blocking emit once cost each phase 3 s and each batch end 30 s (a 1 s configuration took 33 s).

While Redis is away the publisher retries the oldest event with backoff (`PAUSE_S`), and the
queue stays small:
- progress (`approach.phase`) is best effort: a newer phase of a batch replaces its queued,
  unsent ones, so each batch keeps at most its latest phase;
- every other event (a batch queued, started, a configuration's result, the batch's end: what
  the chat's summary and the CLI need) is kept, in order, and sent once Redis answers again;
- past `MAX_QUEUED` events (hours of outage) the oldest progress goes first, then the oldest
  event of any kind, each drop counted and logged.
While Redis answers, nothing is coalesced: every event goes out, in order.

`flush(timeout)` waits until the queue has been sent; a short-lived process (the CLI's
dispatcher) calls `close`, which flushes for a bounded time. The store stays the truth: an event
lost with its process is a notification missed, and readers look at the store for ends.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass

import redis

from jobs.broker.streams import MAX_LEN, STREAM
from jobs.core.events import Event

log = logging.getLogger(__name__)

MAX_QUEUED = 10_000
PAUSE_S = (0.1, 2.0)  # between tries while Redis is away: from, doubling to
PROGRESS = "approach.phase"
_AWAY = (redis.ConnectionError, redis.TimeoutError, OSError)


@dataclass(frozen=True)
class _Queued:
    payload: str
    kind: str
    batch: str

    @property
    def is_progress(self) -> bool:
        return self.kind == PROGRESS


class StreamSink:
    """Emits events to the stream from a background thread (see the module's docstring)."""

    def __init__(self, client: redis.Redis, *, stream: str = STREAM,
                 max_queued: int = MAX_QUEUED) -> None:
        self._client = client
        self._stream = stream
        self._max = max_queued
        self._queue: deque[_Queued] = deque()
        self._cond = threading.Condition()
        self._in_flight = False
        self._closed = False
        self._away_since: float | None = None
        self._thread: threading.Thread | None = None
        self.dropped = 0  # events given up on (queue full, or refused by Redis)

    def emit(self, event: Event) -> None:
        """Queue `event` for the stream; never blocks on Redis."""
        item = _Queued(json.dumps(event, ensure_ascii=False, default=str),
                       str(event.get("type")), str(event.get("batch")))
        with self._cond:
            self._queue.append(item)
            if self._away_since is not None:
                self._coalesce()
            self._bound()
            if self._thread is None:
                self._thread = threading.Thread(target=self._publish, name="event-sink",
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()

    @property
    def queued(self) -> int:
        with self._cond:
            return len(self._queue) + self._in_flight

    @property
    def is_away(self) -> bool:
        """Whether the last try to send failed (Redis unreachable)."""
        return self._away_since is not None

    def flush(self, timeout: float) -> bool:
        """Wait up to `timeout` s until every queued event is sent; whether they all were."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or self._in_flight:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, *, timeout: float = 2.0) -> None:
        """Flush for at most `timeout` s, then stop the publisher; what is left is dropped."""
        sent = self.flush(timeout)
        with self._cond:
            left = len(self._queue)
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()
        if not sent and left:
            self.dropped += left
            log.warning("%d event(s) dropped at close: Redis unreachable", left)
        if self._thread is not None:
            self._thread.join(timeout=1.0)

    def _publish(self) -> None:
        pause = PAUSE_S[0]
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                item = self._queue.popleft()
                self._in_flight = True
            try:
                self._client.xadd(self._stream, {"event": item.payload}, maxlen=MAX_LEN,
                                  approximate=True)
            except _AWAY as exc:
                with self._cond:
                    self._in_flight = False
                    self._queue.appendleft(item)
                    self._on_away(exc)
                    deadline = time.monotonic() + pause
                    while not self._closed and (left := deadline - time.monotonic()) > 0:
                        self._cond.wait(left)  # close() ends the wait
                pause = min(pause * 2, PAUSE_S[1])
                continue
            except redis.RedisError as exc:  # Redis answered no (out of memory...): not retried
                log.warning("event %s of %s dropped: Redis refused it (%s)", item.kind,
                            item.batch, exc)
                self.dropped += 1
            with self._cond:
                self._in_flight = False
                if self._away_since is not None:
                    log.info("events: Redis answers again after %.1f s; %d queued to send",
                             time.monotonic() - self._away_since, len(self._queue))
                    self._away_since = None
                pause = PAUSE_S[0]
                self._cond.notify_all()

    def _on_away(self, exc: BaseException) -> None:
        if self._away_since is None:
            self._away_since = time.monotonic()
            log.warning("events: Redis unreachable (%s); progress is coalesced and every other "
                        "event kept until it answers", type(exc).__name__)
            self._coalesce()

    def _coalesce(self) -> None:
        """Keep each batch's latest queued progress event only (called with the lock held)."""
        seen: set[str] = set()
        kept: deque[_Queued] = deque()
        for item in reversed(self._queue):
            if item.is_progress:
                if item.batch in seen:
                    continue
                seen.add(item.batch)
            kept.appendleft(item)
        self._queue = kept

    def _bound(self) -> None:
        """At most `max_queued` events, the one being sent counted: the oldest progress goes
        first (lock held)."""
        excess = len(self._queue) + self._in_flight - self._max
        if excess <= 0:
            return
        if any(item.is_progress for item in self._queue):
            kept: deque[_Queued] = deque()
            for item in self._queue:
                if excess > 0 and item.is_progress:
                    excess -= 1
                    self.dropped += 1
                    continue
                kept.append(item)
            self._queue = kept
        while excess > 0:
            gone = self._queue.popleft()
            excess -= 1
            self.dropped += 1
            log.warning("event %s of %s dropped: %d events queued while Redis is away",
                        gone.kind, gone.batch, self._max)
