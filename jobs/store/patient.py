"""The store a batch runs with: its reads and writes wait out a database outage.

A worker (embedded or Celery) that loses its database mid-batch must not fail the batch: each
call `execute_batch` makes (and the sweep's, and the memory's) is tried again through an outage
for up to `jobs.store.outage.patience_s()` (15 minutes by default), with the outage rule's
pauses, and the batch goes on where it was once the database answers. Every write it retries is
idempotent (an upsert, a state set, a keyed insert, a batch's end, which finds itself:
`Store.end`), so a commit whose answer was lost is harmless when repeated. The cancel check
never holds the batch's polling loop for long: it asks in the background and, until the database
answers, says what it said last.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

from jobs.core.plans import BatchPlan
from jobs.core.records import RunRecord
from jobs.store.outage import describe, is_outage, log, wait_out
from jobs.store.schema import BatchRow
from jobs.store.store import ACTIVE_STATES, Store

T = TypeVar("T")
CANCEL_WAIT_S = 1.0  # the longest a cancel check holds its caller
_CHECKS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="specbench-cancel-check")


class PatientStore(Store):
    """A `Store` whose batch calls wait out an outage (see the module's docstring)."""

    @classmethod
    def over(cls, store: Store) -> PatientStore:
        """The same database as `store` (its engine and pool), patient."""
        if isinstance(store, PatientStore):
            return store
        patient = cls.__new__(cls)
        vars(patient).update(vars(store))
        return patient

    def _patiently(self, what: str, call: Callable[[], T]) -> T:
        return wait_out(call, what=f"store {what}")

    def get_batch(self, batch_id: str) -> BatchRow | None:
        return self._patiently("get_batch", lambda: Store.get_batch(self, batch_id))

    def records(self, batch_id: str, *, stack: str = "") -> list[RunRecord]:
        return self._patiently("records", lambda: Store.records(self, batch_id, stack=stack))

    def put_records(self, records: Sequence[tuple[int, RunRecord]], *, stack: str = "") -> None:
        self._patiently("put_records", lambda: Store.put_records(self, records, stack=stack))

    def set_state(
        self, batch_id: str, state: str, *, error: str | None = None, host: str | None = None,
        only_from: Sequence[str] | None = None,
    ) -> bool:
        return self._patiently("set_state", lambda: Store.set_state(
            self, batch_id, state, error=error, host=host, only_from=only_from))

    def end(
        self, batch_id: str, state: str, *, report: dict[str, Any] | None = None,
        error: str | None = None, host: str | None = None,
        only_from: Sequence[str] = ACTIVE_STATES,
    ) -> bool:
        return self._patiently("end", lambda: Store.end(
            self, batch_id, state, report=report, error=error, host=host, only_from=only_from))

    def create_batch(
        self, *, batch_id: str, preset: str, engine: str, queue: str, requested_by: str,
        plan: BatchPlan, channel: str | None = None, thread_ts: str | None = None,
        idempotency_key: str | None = None, created_at: datetime | None = None,
    ) -> tuple[BatchRow, bool]:
        return self._patiently("create_batch", lambda: Store.create_batch(
            self, batch_id=batch_id, preset=preset, engine=engine, queue=queue,
            requested_by=requested_by, plan=plan, channel=channel, thread_ts=thread_ts,
            idempotency_key=idempotency_key, created_at=created_at))

    def last_run_of(self, *args: Any, **kwargs: Any) -> Any:
        return self._patiently("last_run_of", lambda: Store.last_run_of(self, *args, **kwargs))

    def failures_of(self, *args: Any, **kwargs: Any) -> Any:
        return self._patiently("failures_of", lambda: Store.failures_of(self, *args, **kwargs))

    def is_cancel_requested(self, batch_id: str) -> bool:
        """Asked in the background for at most CANCEL_WAIT_S; a cancel once seen stays seen,
        and an answer not in yet (an outage, a hung database) reads as the last one."""
        with _cancel_lock:
            checks = _cancel_state(self)
            known = checks.answers.get(batch_id, False)
            pending = checks.pending.get(batch_id)
            wait = 0.0 if pending is not None else CANCEL_WAIT_S  # one already asking: no wait
            if pending is None:
                pending = checks.pending[batch_id] = _CHECKS.submit(
                    Store.is_cancel_requested, self, batch_id)
        try:
            answer = pending.result(timeout=wait)
        except TimeoutError:
            return known  # still asking: the next poll looks again
        except Exception as exc:
            with _cancel_lock:
                checks.pending.pop(batch_id, None)
            if not is_outage(exc):
                raise
            log.warning("cancel check of %s failed (%s); asking again later", batch_id,
                        describe(exc))
            return known
        with _cancel_lock:
            checks.pending.pop(batch_id, None)
            known = checks.answers[batch_id] = known or answer
        return known


class _CancelChecks:
    def __init__(self) -> None:
        self.pending: dict[str, Future[bool]] = {}
        self.answers: dict[str, bool] = {}


_cancel_lock = threading.Lock()


def _cancel_state(store: PatientStore) -> _CancelChecks:
    state = vars(store).get("_cancel_checks")
    if state is None:
        state = vars(store)["_cancel_checks"] = _CancelChecks()
    return state
