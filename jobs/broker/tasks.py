"""The GPU worker's Celery task, `run_batch(batch_id)` (the beat's `send_digest` is in
bot.slack.digest: nothing here talks to Slack).

A task takes an ID, loads the rest from the store and calls one core function. `run_batch` runs
a batch only while it holds the batch's store lease (renewed by a heartbeat thread), so that a
duplicate or re-sent message, however late, never runs a batch twice at once. A lease whose
owner was a worker of this host that is now dead is taken at once (`jobs.broker.worker`'s
`is_dead_here`), and the store waits out a database outage (`PatientStore`). A batch is never
failed for the database being away: past the store's patience it is left to its lease, and a
worker's recovery sweep resumes it once the database answers. A worker told to stop (SIGTERM)
hands its batch back: the batch's next stop check raises `HandedBack`, which stops the running
server as a cancel does, but records nothing for the configuration in flight; the lease is
released, a fresh `run_batch` goes to the queue and the thread says so, and the next worker
resumes the batch where it was (the interrupted configuration runs again).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable

from celery import shared_task

from jobs import redaction
from jobs.batches.execution import execute_batch
from jobs.broker.celery_app import RUN_BATCH
from jobs.broker.worker import Runtime, is_dead_here, lease_owner, registry_dir, runtime
from jobs.core.events import make_event
from jobs.engines import procs
from jobs.store import TERMINAL_STATES, BatchRow, Store
from jobs.store.outage import describe, is_outage

log = logging.getLogger(__name__)


class LeaseLost(Exception):
    """Another worker took the batch's lease: this one must let go at once."""


class HandedBack(Exception):
    """The worker is stopping (SIGTERM): the batch stops here and goes back to the queue."""


class LeaseKeeper:
    """Renews a held lease every TTL/3; `check` (the batch's stop callback) raises once lost, or
    once `stopping()` says the worker is told to stop."""

    def __init__(self, store: Store, *, batch_id: str, owner: str, ttl: float,
                 stopping: Callable[[], str | None] = lambda: None) -> None:
        self._store, self._batch_id, self._owner, self._ttl = store, batch_id, owner, ttl
        self._stopping = stopping
        self._stop = threading.Event()
        self.lost = False
        self._thread = threading.Thread(target=self._renew, name=f"lease-{batch_id}",
                                        daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            self._store.release_lease(self._batch_id, self._owner)
        except Exception:  # noqa: BLE001 - it expires by itself
            log.warning("could not release the lease of %s", self._batch_id, exc_info=True)

    def check(self) -> bool:
        if self.lost:
            raise LeaseLost(self._batch_id)
        if (signal := self._stopping()) is not None:
            raise HandedBack(signal)
        return False

    def _renew(self) -> None:
        while not self._stop.wait(self._ttl / 3):
            try:
                if not self._store.renew_lease(self._batch_id, self._owner, self._ttl):
                    log.error("lease of %s taken by another worker; stopping", self._batch_id)
                    self.lost = True
                    return
            except Exception:  # noqa: BLE001 - a store hiccup: the next renewal may succeed
                log.warning("lease renewal of %s failed", self._batch_id, exc_info=True)


def run_leased(rt: Runtime, batch_id: str) -> str:
    """Run (or resume) a batch if no live worker holds it; what happened, in a word."""
    row = rt.store.get_batch(batch_id)
    if row is None:
        return "unknown"
    if row.state in TERMINAL_STATES:
        return "ended"
    owner = lease_owner()
    if not _take_lease(rt, row, owner):
        return "leased"
    rt.set_busy(True)
    try:
        with LeaseKeeper(rt.store, batch_id=batch_id, owner=owner, ttl=rt.ttl,
                         stopping=lambda: rt.stopping) as keeper:
            row = rt.store.get_batch(batch_id)  # it may have ended before we took the lease
            if row is None or row.state in TERMINAL_STATES:
                return "ended"
            procs.kill_orphans(registry_dir(rt.queue))
            try:
                execute_batch(batch_id, store=rt.store, sink=rt.sink, should_stop=keeper.check)
            except LeaseLost:
                return "lost"
            except HandedBack as stop:
                signal = str(stop)  # the server is stopped; the lease is released below
            except Exception as exc:  # noqa: BLE001 - a batch's bug must not kill the worker
                if is_outage(exc):  # the store waited past its patience: resume, never fail
                    log.error("batch %s: the database is still away (%s); it resumes once the "
                              "database answers and its lease lapses", batch_id, describe(exc))
                    return "interrupted"
                log.exception("batch %s failed", batch_id)
                return _record_failure(rt, batch_id, exc)
            else:
                return "ran"
        return _hand_back(rt, batch_id, signal=signal)
    finally:
        rt.set_busy(False)


def _hand_back(rt: Runtime, batch_id: str, *, signal: str) -> str:
    """Put a batch this stopping worker let go of (its lease released) back on its queue, and
    say so in its thread; a message that cannot be sent is left to a worker's recovery sweep."""
    from celery import current_app

    host = socket.gethostname()
    try:
        current_app.send_task(RUN_BATCH, args=[batch_id], queue=rt.queue)
    except Exception:  # noqa: BLE001 - Redis away: the lease is free, a sweep re-sends it
        log.warning("batch %s: could not requeue it; a worker's recovery sweep will",
                    batch_id, exc_info=True)
    log.warning("batch %s: worker told to stop (%s); its server is stopped and the batch is "
                "handed back to queue %s", batch_id, signal, rt.queue)
    rt.sink.emit(make_event(
        "batch.paused", batch_id, host=host, cause="worker-stopped",
        reason=f"the worker on {host} was told to stop ({signal}): the configuration in flight "
               f"runs again when a worker of queue {rt.queue} takes the batch"))
    return "handed back"


def _take_lease(rt: Runtime, row: BatchRow, owner: str) -> bool:
    """The batch's lease: free or lapsed, or held by a process of this host that is gone (a
    worker killed and restarted here need not wait for the lease to lapse)."""
    if rt.store.try_acquire_lease(row.id, owner, rt.ttl):
        return True
    held_by = (rt.store.get_batch(row.id) or row).lease_owner
    if held_by is None or not is_dead_here(held_by):
        return False
    taken = rt.store.take_over_lease(row.id, owner, rt.ttl, dead=held_by)
    if taken:
        log.info("took the lease of %s from %s, a dead worker of this host", row.id, held_by)
    return taken


def _record_failure(rt: Runtime, batch_id: str, exc: Exception) -> str:
    """End the batch failed; the store waits out a database blip (PatientStore). If it is
    still away, the lease lapses and a worker's recovery sweep resumes the batch later. One
    that ended meanwhile (a cancel that ended it here) keeps that ending: "ended"."""
    error = redaction.redact(str(exc), secrets=redaction.secret_values(os.environ))[:500]
    try:
        if not rt.store.end(batch_id, "failed", error=error):
            return "ended"
    except Exception:  # noqa: BLE001 - the handler of a failure must not fail itself
        log.exception("could not record batch %s as failed; it resumes later", batch_id)
        return "unrecorded"
    rt.sink.emit(make_event("batch.finished", batch_id, state="failed", report=None,
                            error=error))
    return "failed"


@shared_task(name=RUN_BATCH, ignore_result=True)  # type: ignore[untyped-decorator]
def run_batch(batch_id: str) -> str:
    result = run_leased(runtime(), batch_id)
    log.info("run_batch %s: %s", batch_id, result)
    return result
