"""The distributed dispatcher: batches become Celery tasks on Redis, events come back on a
Redis Stream. The store stays the source of truth; a message only wakes a worker up.
"""

from __future__ import annotations

import logging
from typing import Any

import redis

from jobs.batches.dispatch_api import Dispatcher, Subscription, request_cancel
from jobs.broker.celery_app import RUN_BATCH, make_app
from jobs.broker.sink import StreamSink
from jobs.broker.streams import StreamSubscription, connect
from jobs.broker.worker import WORKER_KEY, ping
from jobs.core.events import Event, make_event
from jobs.errors import BrokerError
from jobs.store import TERMINAL_STATES, BatchRow, Store

log = logging.getLogger(__name__)

PING_TIMEOUT_S = 2.0


class DistributedDispatcher(Dispatcher):
    mode = "distributed"

    def __init__(self, store: Store, url: str) -> None:
        self.store = store
        self.url = url
        self._client = connect(url, timeout_s=PING_TIMEOUT_S)
        self._sink = StreamSink(self._client)  # sends from a thread of its own; flushed at close
        self._app: Any = None
        self._checked = False

    def _celery(self) -> Any:
        if self._app is None:
            self._app = make_app(self.url)
        return self._app

    def check_broker(self) -> None:
        """BrokerError, within about 2 s, unless the broker answers."""
        ping(self._client, self.url)

    def _before_submit(self) -> None:
        if not self._checked:  # once per dispatcher: a bot submitting all day pings once
            self.check_broker()
            self._checked = True

    def _enqueue(self, row: BatchRow) -> int:
        try:
            self._celery().send_task(RUN_BATCH, args=[row.id], queue=row.queue)
        except Exception as exc:  # noqa: BLE001 - kombu raises many kinds; all mean "unreachable"
            self.store.delete_batch(row.id)
            self._checked = False
            raise BrokerError.unreachable(self.url, exc) from None
        return self.position(row)

    def _emit(self, event: Event) -> None:
        self._sink.emit(event)

    def _wake(self, row: BatchRow) -> None:
        return None  # the task sent by `_enqueue` wakes a worker

    def position(self, row: BatchRow) -> int:
        """1 + the unfinished batches ahead of it on its queue (0 once it has ended)."""
        if row.state in TERMINAL_STATES:
            return 0
        return self.store.count_ahead(row) + 1

    def cancel(self, batch_id: str) -> BatchRow:
        before = self.store.get_batch(batch_id)
        row = request_cancel(self.store, batch_id)
        if before is not None and before.state == "queued" and row.state == "cancelled":
            # No worker will tell: the batch never started, its message finds it ended.
            self._sink.emit(make_event("batch.cancelled", batch_id, state="cancelled",
                                       report=None))
        return row

    def subscribe(self, *, batch: str | None = None) -> Subscription:
        return StreamSubscription(connect(self.url), batch=batch)

    def live_workers(self, queue_name: str) -> int | None:
        """Workers whose heartbeat key for this queue is alive; None when Redis is away."""
        pattern = WORKER_KEY.format(queue=queue_name, worker="*")
        try:
            return sum(1 for _ in self._client.scan_iter(match=pattern, count=500))
        except (redis.RedisError, OSError):
            return None

    def close(self) -> None:
        self._sink.close(timeout=PING_TIMEOUT_S)
        self._client.close()
        if self._app is not None:
            self._app.close()
