"""Dispatch: where a submitted batch goes, and how its events come back.

Two implementations share one interface (docs/contracts.md's modes; jobs.batches.dispatch_api, where
both find it): `EmbeddedDispatcher` runs batches on an in-process worker thread, one at a
time, and publishes events on an in-process channel; `jobs.broker.dispatcher.
DistributedDispatcher` sends them as Celery tasks over Redis and reads events from a Redis
Stream. Chat surfaces (CLI, console, Slack) only see `Dispatcher`, which
`jobs.dispatchers.get_dispatcher` picks by the settings.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from jobs import redaction
from jobs.batches import retention, runners
from jobs.batches.dispatch_api import (
    Dispatcher,
    QueueEntry,
    Submitted,
    Subscription,
    queue_entries,
    request_cancel,
)
from jobs.batches.execution import execute_batch
from jobs.core.events import Event, LocalChannel, make_event
from jobs.engines.base import worker_secrets
from jobs.store import ACTIVE_STATES, TERMINAL_STATES, BatchRow, Store
from jobs.store.patient import PatientStore

# The shared names, where the chat surfaces have always found them.
__all__ = ["Dispatcher", "EmbeddedDispatcher", "QueueEntry", "Submitted", "Subscription",
           "queue_entries", "request_cancel"]

log = logging.getLogger(__name__)


class _LocalSubscription:
    def __init__(self, channel: LocalChannel, batch: str | None) -> None:
        self._channel = channel
        self._inbox = channel.subscribe()
        self._batch = batch

    def get(self, timeout: float) -> Event | None:
        try:
            while True:
                event = self._inbox.get(timeout=timeout)
                if self._batch is None or event.get("batch") == self._batch:
                    return event
        except queue.Empty:
            return None

    def close(self) -> None:
        self._channel.unsubscribe(self._inbox)


class EmbeddedDispatcher(Dispatcher):
    """Batches run on one in-process worker thread, in submission order. The process owns
    them: it holds their leases (`runners.owner_name`), so that a command that finds it dead
    ends them, and `close` ends those it has not finished (docs/contracts.md "Every batch ends")."""

    mode = "embedded"

    def __init__(self, store: Store, *, engine_factory: Callable[[str], Any] | None = None) -> None:
        self.store = store
        self.channel = LocalChannel()
        self._inbox: queue.Queue[str | None] = queue.Queue()
        self._pending: list[str] = []
        self._lock = threading.Lock()
        self._engine_factory = engine_factory
        self.owner = runners.owner_name()
        self._stop = threading.Event()  # set: the running batch stops now, as for a cancel
        self._hurried = False  # a plain flag: set from a signal handler, see `hurry`
        self._thread = threading.Thread(target=self._work, name="specbench-worker", daemon=True)
        self._thread.start()
        retention.start_pruning(  # old server logs go, as on a distributed worker's start
            lambda: [r.id for r in store.list_batches(states=ACTIVE_STATES)], every=None)

    def _before_submit(self) -> None:
        return None  # the worker is this process: nothing to reach first

    def _enqueue(self, row: BatchRow) -> int:
        self.store.try_acquire_lease(row.id, self.owner, runners.EMBEDDED_LEASE_S)
        with self._lock:
            self._pending.append(row.id)
            return len(self._pending)

    def _emit(self, event: Event) -> None:
        self.channel.emit(event)

    def _wake(self, row: BatchRow) -> None:
        self._inbox.put(row.id)

    def cancel(self, batch_id: str) -> BatchRow:
        row = request_cancel(self.store, batch_id)
        if row.state == "cancelled":
            with self._lock:
                was_pending = batch_id in self._pending
            if was_pending:
                self.channel.emit(make_event("batch.cancelled", batch_id, state="cancelled",
                                             report=None))
        return row

    def subscribe(self, *, batch: str | None = None) -> Subscription:
        return _LocalSubscription(self.channel, batch)

    def live_workers(self, queue_name: str) -> int | None:
        return 1

    def close(self, *, reason: str = "the process that ran it exited") -> None:
        """Stop the worker thread; a batch it has not finished ends `cancelled` first, its
        servers stopped (`runners.stop_owned`), whatever interrupts the wait."""
        with self._lock:
            mine = list(self._pending)
        while mine:
            try:
                runners.stop_owned(self.store, mine, stop=self._stop, busy=self._busy,
                                   hurried=lambda: self._hurried, reason=reason)
                break
            except KeyboardInterrupt:  # stopping is what a signal asks for: faster, then
                self._hurried = True
        self._inbox.put(None)
        self._thread.join(timeout=5)

    def hurry(self) -> None:
        """Make `close` SIGKILL the servers now instead of waiting for a clean stop (a second
        signal). Only sets a flag, so a signal handler may call it."""
        self._hurried = True

    def _busy(self) -> bool:
        with self._lock:
            return bool(self._pending)

    def position(self, row: BatchRow) -> int:
        with self._lock:
            return self._pending.index(row.id) + 1 if row.id in self._pending else 0

    def _work(self) -> None:
        while True:
            batch_id = self._inbox.get()
            if batch_id is None:
                return
            store = PatientStore.over(self.store)  # a database outage delays, never fails
            try:
                row = store.get_batch(batch_id)
                if row is not None and row.state not in TERMINAL_STATES:
                    execute_batch(batch_id, store=store, sink=self.channel,
                                  engine_for=self._engine_factory, should_stop=self._stop.is_set)
            except Exception as exc:  # noqa: BLE001 - a batch's bug must not kill the worker
                log.exception("batch %s failed", batch_id)
                error = redaction.redact(str(exc), secrets=worker_secrets())[:500]
                if store.end(batch_id, "failed", error=error):  # not one ended meanwhile
                    self.channel.emit(make_event("batch.finished", batch_id, state="failed",
                                                 report=None, error=error))
            finally:
                with self._lock:
                    if batch_id in self._pending:
                        self._pending.remove(batch_id)
