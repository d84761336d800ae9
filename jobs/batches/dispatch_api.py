"""What every dispatcher shares (docs/contracts.md's modes): the `Dispatcher` base the chat
surfaces see, with the one submit (each implementation says only how a stored batch reaches its
runner and how an event is sent), what a submit answers (`Submitted`), the queue as `status`
shows it (`QueueEntry`, with estimates from the past) and the one cancel.

Its own module so that both implementations, `jobs.batches.dispatch.EmbeddedDispatcher` and
`jobs.broker.dispatcher.DistributedDispatcher`, build on it without importing each other.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Protocol

from jobs import settings
from jobs.batches.planning import submit as store_batch
from jobs.core.estimates import Estimate, PastRun, estimate, last_end, to_past_run
from jobs.core.events import Event, make_event
from jobs.core.plans import BatchPlan
from jobs.errors import UserError
from jobs.store import ACTIVE_STATES, TERMINAL_STATES, BatchRow, Store

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


class Dispatcher(abc.ABC):
    """Where a submitted batch goes. `submit` is the one path of both implementations: the batch
    stored queued (`jobs.batches.planning.submit`), then handed on (`_enqueue`), announced
    (`batch.queued`) and its runner woken (`_wake`)."""

    mode: str
    store: Store

    def submit(
        self,
        plan: BatchPlan,
        *,
        requested_by: str,
        channel: str | None = None,
        idempotency_key: str | None = None,
    ) -> Submitted:
        self._before_submit()
        row, created = store_batch(
            plan, store=self.store, requested_by=requested_by, channel=channel,
            idempotency_key=idempotency_key,
        )
        live = self.live_workers(row.queue)
        if not created:
            return Submitted(row, False, self.position(row), live)
        position = self._enqueue(row)
        self._emit(make_event(
            "batch.queued", row.id, queue=row.queue, position=position, preset=row.preset,
            approaches=[c.approach for c in row.plan.configs], live_workers=live,
        ))
        self._wake(row)
        return Submitted(row, True, position, live)

    def queues(self) -> dict[str, list[QueueEntry]]:
        return queue_entries(self.store, self.store.list_batches(states=ACTIVE_STATES))

    @abc.abstractmethod
    def position(self, row: BatchRow) -> int:
        """1: runs next (or now); n: n-1 batches ahead of it; 0 once it has ended."""

    @abc.abstractmethod
    def cancel(self, batch_id: str) -> BatchRow:
        """Ask a queued or running batch to stop; UserError for an unknown batch."""

    @abc.abstractmethod
    def subscribe(self, *, batch: str | None = None) -> Subscription:
        """Events from now on (of one batch, or all); subscribe before submitting."""

    @abc.abstractmethod
    def live_workers(self, queue_name: str) -> int | None:
        """Workers serving the queue now; None where it cannot be known."""

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def _before_submit(self) -> None:
        """Raise what must hold before a batch is stored (the broker answers)."""

    @abc.abstractmethod
    def _enqueue(self, row: BatchRow) -> int:
        """Hand a newly stored batch to its runner; its position."""

    @abc.abstractmethod
    def _emit(self, event: Event) -> None:
        """An event for every subscriber."""

    @abc.abstractmethod
    def _wake(self, row: BatchRow) -> None:
        """Let the runner start the batch, once `batch.queued` is out."""


def request_cancel(store: Store, batch_id: str) -> BatchRow:
    """The shared cancel: a queued batch ends now, a running one at its next poll."""
    row = store.get_batch(batch_id)
    if row is None:
        raise UserError(f"unknown batch {batch_id!r}")
    if row.state in TERMINAL_STATES:
        return row
    store.request_cancel(batch_id)
    store.end(batch_id, "cancelled", only_from=("queued",))
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
