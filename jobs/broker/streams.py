"""Events over Redis: the stream, and the two ways to read it back (the sink a worker emits
to, which never waits on Redis, is jobs.broker.sink).

Every event is one entry of the stream `specbench:events` with a single field, `event`, holding
the event's JSON. `StreamSubscription` follows the stream from now on (`specbench run` waiting
for its batch); `StreamReader` is a durable consumer-group reader for a chat surface: entries it
was given but did not acknowledge (it crashed mid-post) are given again when it comes back.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from jobs.core.events import Event

log = logging.getLogger(__name__)

STREAM = "specbench:events"
MAX_LEN = 100_000  # roughly a few weeks of events; trimmed approximately, which is cheap
_ERRORS = (redis.ConnectionError, redis.TimeoutError, OSError)
# What a subscription rides out: any client-side failure (a reply cut off mid-way reads as a
# protocol error), never raised to a caller that waits for events (`specbench run`).
_READ_ERRORS = (redis.RedisError, OSError)
_AWAY_PAUSE_S = (0.2, 1.0)  # between reads while Redis is away: from, doubling to


def connect(url: str, *, timeout_s: float = 5.0) -> redis.Redis:
    """A client that answers or fails within `timeout_s`, never hangs."""
    return redis.Redis.from_url(
        url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, health_check_interval=0,
    )


def decode(fields: dict[Any, Any]) -> Event:
    raw = fields.get(b"event", fields.get("event", b"{}"))
    event: Event = json.loads(raw)
    return event


class StreamSubscription:
    """The events appended after it was made (of one batch, or all): XREAD from the then-last ID.

    It rides out a Redis restart or outage: an unreachable Redis reads as "no event yet" (it
    is retried quietly, with backoff; `specbench run` polls the store meanwhile).
    """

    def __init__(self, client: redis.Redis, *, batch: str | None = None,
                 stream: str = STREAM) -> None:
        self._client = client
        self._stream = stream
        self._batch = batch
        self._buffer: list[Event] = []
        self._pause = _AWAY_PAUSE_S[0]
        self._away_since: float | None = None
        self._last = self._last_id()

    def _last_id(self) -> str:
        try:
            newest = self._client.xrevrange(self._stream, count=1)
        except _READ_ERRORS:
            return "0-0"
        if not newest:
            return "0-0"
        entry_id = newest[0][0]
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)

    def get(self, timeout: float) -> Event | None:
        deadline = time.monotonic() + timeout
        while True:
            while self._buffer:
                event = self._buffer.pop(0)
                if self._batch is None or event.get("batch") == self._batch:
                    return event
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                answer = self._client.xread({self._stream: self._last}, count=100,
                                            block=max(int(left * 1000), 1))
            except _READ_ERRORS as exc:
                self._on_away(exc)
                time.sleep(min(self._pause, max(deadline - time.monotonic(), 0)))
                self._pause = min(self._pause * 2, _AWAY_PAUSE_S[1])
                continue
            if self._away_since is not None:
                log.info("events: Redis answers again after %.1f s",
                         time.monotonic() - self._away_since)
                self._away_since, self._pause = None, _AWAY_PAUSE_S[0]
            for entry in _entries(answer):
                self._last = entry.id
                self._buffer.append(entry.event)

    def _on_away(self, exc: Exception) -> None:
        if self._away_since is None:
            self._away_since = time.monotonic()
            log.debug("events: Redis unreachable (%s); retrying", type(exc).__name__)

    def close(self) -> None:
        try:
            self._client.close()
        except _READ_ERRORS:
            pass


@dataclass(frozen=True)
class StreamEntry:
    id: str
    event: Event


class StreamReader:
    """A durable reader in a consumer group: `read` gives this consumer's unacknowledged
    entries first (a restart resumes there), then entries idle too long at a dead consumer of the
    group, then new ones; `ack` an entry only once it has been handled."""

    def __init__(self, client: redis.Redis, *, group: str, consumer: str,
                 stream: str = STREAM, start: str = "$", claim_idle_s: float = 60.0) -> None:
        self._client = client
        self._group = group
        self._consumer = consumer
        self._stream = stream
        self._start = start
        self._claim_idle_ms = int(claim_idle_s * 1000)
        self._replay = True  # our own pending entries first, once per (re)start
        self._ensure_group()

    def _ensure_group(self) -> None:
        try:
            self._client.xgroup_create(self._stream, self._group, id=self._start, mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def read(self, timeout: float, *, count: int = 100) -> list[StreamEntry]:
        """Up to `count` entries; an empty list after `timeout` s or while Redis is away."""
        try:
            if self._replay:
                mine = self._group_read("0", count=count, block=None)
                if mine:
                    return mine
                self._replay = False
            claimed = self._claim(count)
            if claimed:
                return claimed
            return self._group_read(">", count=count, block=max(int(timeout * 1000), 1))
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            self._ensure_group()  # the stream vanished (a Redis without persistence restarted)
            return []
        except _ERRORS:
            time.sleep(min(timeout, 0.2))
            return []

    def ack(self, *entry_ids: str) -> None:
        if entry_ids:
            self._client.xack(self._stream, self._group, *entry_ids)

    def process(self, handler: Callable[[Event], None], *, timeout: float) -> int:
        """Hand each entry to `handler` and acknowledge it after; the number handled. An entry
        whose handler raises stays pending and comes back on the next start."""
        handled = 0
        for entry in self.read(timeout):
            handler(entry.event)
            self.ack(entry.id)
            handled += 1
        return handled

    def _group_read(self, cursor: str, *, count: int, block: int | None) -> list[StreamEntry]:
        answer = self._client.xreadgroup(self._group, self._consumer, {self._stream: cursor},
                                         count=count, block=block)
        return _entries(answer)

    def _claim(self, count: int) -> list[StreamEntry]:
        answer = self._client.xautoclaim(self._stream, self._group, self._consumer,
                                         min_idle_time=self._claim_idle_ms, start_id="0-0",
                                         count=count)
        entries = answer[1] if len(answer) > 1 else []
        return [_entry(entry_id, fields) for entry_id, fields in entries if fields]

    def close(self) -> None:
        self._client.close()


def _entry(entry_id: Any, fields: dict[Any, Any]) -> StreamEntry:
    name = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
    return StreamEntry(name, decode(fields))


def _entries(answer: Any) -> list[StreamEntry]:
    """XREAD/XREADGROUP's [[stream, [(id, fields), ...]], ...] as entries (trimmed ones, whose
    fields are gone, left out)."""
    return [_entry(entry_id, fields) for _name, entries in answer or []
            for entry_id, fields in entries if fields]
