"""Dispatch: where a submitted batch goes, and how its events come back.

Two implementations share this interface (SPEC.md's modes): `EmbeddedDispatcher` runs batches
on an in-process worker thread, one at a time, and publishes events on an in-process channel;
`jobs.broker.dispatcher.DistributedDispatcher` sends them as Celery tasks over Redis and reads
events from a Redis Stream. Chat surfaces (CLI, console, Slack) only see `Dispatcher`.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from jobs import settings
from jobs.batches import retention, runners
from jobs.batches.execution import execute_batch
from jobs.batches.planning import submit
from jobs.core.errors import UserError
from jobs.core.estimates import Estimate, PastRun, estimate, last_end, to_past_run
from jobs.core.events import Event, LocalChannel, make_event
from jobs.core.plans import BatchPlan
from jobs.engines.base import worker_secrets
from jobs.store import TERMINAL_STATES, BatchRow, Store
from jobs.store.patient import PatientStore

log = logging.getLogger(__name__)
HISTORY_BATCHES = 20  # a preset's finished batches its estimates are drawn from, newest


@dataclass(frozen=True)
class Submitted:
    batch: BatchRow
    created: bool  # False: the idempotency key named an existing batch; nothing new started
    position: int  # 1: runs next (or now); n: n-1 batches ahead of it on its queue
    live_workers: int | None  # workers serving the queue now; None where it cannot be known


@dataclass(frozen=True)
class QueueEntry:
    batch: BatchRow
    position: int  # 0: running; 1: next; ...
    eta_s: float | None  # estimated seconds until it ends, from past durations; None: unknown
    # Seconds the configuration running now (or, for a queued batch, the one it waits behind)
    # is past its estimate: `eta_s` then counts only what comes after it, a lower bound.
    overdue_s: float | None = None


class Subscription(Protocol):
    def get(self, timeout: float) -> Event | None:
        """The next event, or None after `timeout` seconds."""
        ...

    def close(self) -> None: ...


class Dispatcher(Protocol):
    mode: str
    store: Store

    def submit(
        self,
        plan: BatchPlan,
        *,
        requested_by: str,
        channel: str | None = None,
        idempotency_key: str | None = None,
    ) -> Submitted: ...

    def cancel(self, batch_id: str) -> BatchRow:
        """Ask a queued or running batch to stop; UserError for an unknown batch."""
        ...

    def subscribe(self, *, batch: str | None = None) -> Subscription:
        """Events from now on (of one batch, or all); subscribe before submitting."""
        ...

    def queues(self) -> dict[str, list[QueueEntry]]: ...

    def live_workers(self, queue_name: str) -> int | None: ...

    def close(self) -> None: ...


def get_dispatcher(store: Store | None = None) -> Dispatcher:
    """Embedded when SPECBENCH_BROKER_URL is unset, distributed otherwise."""
    store = store or Store()
    url = settings.broker_url()
    if url is None:
        return EmbeddedDispatcher(store)
    from jobs.broker.dispatcher import DistributedDispatcher

    return DistributedDispatcher(store, url)


def request_cancel(store: Store, batch_id: str) -> BatchRow:
    """The shared cancel: a queued batch ends now, a running one at its next poll."""
    row = store.get_batch(batch_id)
    if row is None:
        raise UserError(f"unknown batch {batch_id!r}")
    if row.state in TERMINAL_STATES:
        return row
    store.request_cancel(batch_id)
    store.set_state(batch_id, "cancelled", only_from=["queued"])
    return store.get_batch(batch_id) or row


def queue_entries(store: Store, rows: list[BatchRow]) -> dict[str, list[QueueEntry]]:
    """Running and queued batches per queue, with positions and estimates from the past
    (`jobs.core.estimates`: per configuration, from the same preset's earlier runs)."""
    by_queue: dict[str, list[BatchRow]] = {}
    for row in rows:
        by_queue.setdefault(row.queue, []).append(row)
    histories = past_runs(store, {row.preset for row in rows})
    out: dict[str, list[QueueEntry]] = {}
    for name, members in by_queue.items():
        members.sort(key=lambda r: (r.state != "running", r.created_at))
        ahead: float | None = 0.0
        late: float | None = None  # the overdue of a batch ahead
        entries = []
        for position, row in enumerate(members):
            left = batch_estimate(store, row, histories.get(row.preset, []))
            if ahead is not None and left is not None:
                ahead += left.left_s
                late = left.overdue_s if late is None else late
            else:
                ahead = None
            offset = 0 if members[0].state == "running" else 1
            entries.append(QueueEntry(batch=row, position=position + offset, eta_s=ahead,
                                      overdue_s=late if ahead is not None else None))
        out[name] = entries
    return out


def batch_estimate(store: Store, row: BatchRow, history: list[PastRun]) -> Estimate | None:
    """What is left of one running or queued batch, from its preset's history."""
    if row.state != "running":
        return estimate(row.plan, history)
    records = store.records(row.id)
    starts = [t for t in (row.started_at, last_end(records)) if t is not None]
    running_s = max((settings.utcnow() - max(starts)).total_seconds(), 0.0) if starts else 0.0
    return estimate(row.plan, history, ended=len(records), running_s=running_s)


def past_runs(store: Store, presets: set[str]) -> dict[str, list[PastRun]]:
    """Each preset's configuration runs in its last HISTORY_BATCHES finished batches."""
    done: dict[str, list[BatchRow]] = {}
    for row in store.list_batches(states=("done",)):
        if row.preset in presets:
            done.setdefault(row.preset, []).append(row)
    return {
        preset: [run for row in rows[-HISTORY_BATCHES:] for record in store.records(row.id)
                 if (run := to_past_run(record)) is not None]
        for preset, rows in done.items()
    }


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


class EmbeddedDispatcher:
    """Batches run on one in-process worker thread, in submission order. The process owns
    them: it holds their leases (`runners.owner_name`), so that a command that finds it dead
    ends them, and `close` ends those it has not finished (SPEC.md "Every batch ends")."""

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
            lambda: [r.id for r in store.list_batches(states=("queued", "running"))], every=None)

    def submit(
        self,
        plan: BatchPlan,
        *,
        requested_by: str,
        channel: str | None = None,
        idempotency_key: str | None = None,
    ) -> Submitted:
        row, created = submit(
            plan, store=self.store, requested_by=requested_by, channel=channel,
            idempotency_key=idempotency_key,
        )
        if not created:
            return Submitted(row, False, self._position(row.id), 1)
        self.store.try_acquire_lease(row.id, self.owner, runners.EMBEDDED_LEASE_S)
        with self._lock:
            self._pending.append(row.id)
            position = len(self._pending)
        self.channel.emit(make_event(
            "batch.queued", row.id, queue=row.queue, position=position, preset=row.preset,
            approaches=[c.approach for c in row.plan.configs], live_workers=1,
        ))
        self._inbox.put(row.id)
        return Submitted(row, True, position, 1)

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

    def queues(self) -> dict[str, list[QueueEntry]]:
        rows = self.store.list_batches(states=("queued", "running"))
        return queue_entries(self.store, rows)

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

    def _position(self, batch_id: str) -> int:
        with self._lock:
            return self._pending.index(batch_id) + 1 if batch_id in self._pending else 0

    def _work(self) -> None:
        while True:
            batch_id = self._inbox.get()
            if batch_id is None:
                return
            store = PatientStore.over(self.store)  # a database outage delays, never fails
            try:
                row = store.get_batch(batch_id)
                if row is not None and row.state not in TERMINAL_STATES:
                    engine = self._engine_factory(row.engine) if self._engine_factory else None
                    execute_batch(batch_id, store=store, sink=self.channel, engine=engine,
                                  should_stop=self._stop.is_set)
            except Exception as exc:  # noqa: BLE001 - a batch's bug must not kill the worker
                log.exception("batch %s failed", batch_id)
                error = settings.redact(str(exc), secrets=worker_secrets())[:500]
                store.set_state(batch_id, "failed", error=error)
                self.channel.emit(make_event("batch.finished", batch_id, state="failed",
                                             report=None, error=error))
            finally:
                with self._lock:
                    if batch_id in self._pending:
                        self._pending.remove(batch_id)
