"""The store: batches and their run records, in SQLite by default and PostgreSQL in production.

`Store` is one object over one database (`jobs.store.database`), its methods grouped by concept:
the batch rows here, run records (`runs`), leases (`leases`), the chat thread's posts (`posts`),
the regression watches (`watches`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, delete, func, literal, or_, select, update
from sqlalchemy.exc import IntegrityError

from jobs.core.plans import BatchPlan, BatchRow
from jobs.store.comparisons import Comparisons
from jobs.store.database import NO_SYNC, UnknownBatch, now, rowcount
from jobs.store.digest_queries import DigestQueries
from jobs.store.histories import Histories
from jobs.store.leases import Leases
from jobs.store.posts import Posts
from jobs.store.runs import Runs, write_verdicts
from jobs.store.schema import Batch, UTCDateTime, to_batch_row
from jobs.store.watches import Watches

# `refused`: the worker's preflight refused the batch before any server started (docs/contracts.md's
# engine contracts).
BATCH_STATES = ("queued", "running", "done", "failed", "cancelled", "refused")
TERMINAL_STATES = frozenset({"done", "failed", "cancelled", "refused"})
ACTIVE_STATES = ("queued", "running")  # a batch still to run, or running: the rest are terminal


class Store(Runs, Leases, Posts, Comparisons, DigestQueries, Histories, Watches):
    """Batches and run records behind one SQLAlchemy URL (default: `settings.database_url()`)."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def create_batch(
        self, *, batch_id: str, preset: str, engine: str, queue: str, requested_by: str,
        plan: BatchPlan, channel: str | None = None, thread_ts: str | None = None,
        idempotency_key: str | None = None, created_at: datetime | None = None,
    ) -> tuple[BatchRow, bool]:
        """A new queued batch and True; or, when the idempotency key is taken, that batch and
        False (race-safe: the UNIQUE constraint decides)."""
        if idempotency_key is not None and (existing := self._by_key(idempotency_key)):
            return existing, False
        batch = Batch(
            id=batch_id, preset=preset, engine=engine, queue=queue, state="queued",
            requested_by=requested_by, channel=channel, thread_ts=thread_ts,
            plan=json.dumps(plan.to_dict()), idempotency_key=idempotency_key,
            cancel_requested=False, created_at=created_at or now(),
        )
        try:
            with self._write() as session:
                session.add(batch)
                session.flush()
                row = to_batch_row(batch)
        except IntegrityError:
            if idempotency_key is None or not (existing := self._by_key(idempotency_key)):
                raise
            return existing, False
        return row, True

    def get_batch(self, batch_id: str) -> BatchRow | None:
        with self._read() as session:
            batch = session.get(Batch, batch_id)
            return None if batch is None else to_batch_row(batch)

    def latest_batch(self) -> BatchRow | None:
        query = select(Batch).order_by(Batch.created_at.desc(), Batch.id.desc()).limit(1)
        with self._read() as session:
            batch = session.scalars(query).first()
            return None if batch is None else to_batch_row(batch)

    def list_batches(
        self, *, since: datetime | None = None, states: Sequence[str] | None = None,
        queue: str | None = None, limit: int | None = None,
    ) -> list[BatchRow]:
        """Matching batches, oldest first (with `limit`: the oldest N)."""
        query = select(Batch).order_by(Batch.created_at, Batch.id)
        if since is not None:
            query = query.where(Batch.created_at >= since)
        if states is not None:
            query = query.where(Batch.state.in_(list(states)))
        if queue is not None:
            query = query.where(Batch.queue == queue)
        if limit is not None:
            query = query.limit(limit)
        with self._read() as session:
            return [to_batch_row(batch) for batch in session.scalars(query)]

    def set_state(
        self, batch_id: str, state: str, *, error: str | None = None, host: str | None = None,
        only_from: Sequence[str] | None = None,
    ) -> bool:
        """Move a batch to `state` (stamping started_at/finished_at); with `only_from`, only
        from those states: False when it was elsewhere. Raises UnknownBatch."""
        if state not in BATCH_STATES:
            raise ValueError(f"unknown batch state {state!r}")
        at = now()
        values = _state_values(state, at=at, error=error, host=host)
        if state == "running":
            values["started_at"] = func.coalesce(Batch.started_at, literal(at, UTCDateTime()))
        query = update(Batch).where(Batch.id == batch_id).values(values)
        if only_from is not None:
            query = query.where(Batch.state.in_(list(only_from)))
        with self._write() as session:
            if rowcount(session.execute(query, execution_options=NO_SYNC)) == 1:
                return True
            if session.get(Batch, batch_id) is None:
                raise UnknownBatch(batch_id)
            return False

    def end(
        self, batch_id: str, state: str, *, report: dict[str, Any] | None = None,
        error: str | None = None, host: str | None = None,
        only_from: Sequence[str] = ACTIVE_STATES,
    ) -> bool:
        """End a batch: terminal `state` with its report (and the digest's judged columns,
        `write_verdicts`) in one transaction, only from `only_from`. False, nothing written, when
        it was elsewhere: ended meanwhile by another (a cancel, a recovery), whose state, report
        and messages stand (docs/contracts.md "Every batch ends": once). A call repeated after a
        commit whose answer was lost (jobs.store.patient) finds its own ending: True again.
        Raises UnknownBatch."""
        if state not in TERMINAL_STATES:
            raise ValueError(f"not a terminal batch state: {state!r}")
        text = None if report is None else json.dumps(report)
        values = _state_values(state, at=now(), error=error, host=host)
        if text is not None:
            values["report"] = text
        mine = Batch.report.is_(None) if text is None else Batch.report == text
        query = update(Batch).where(Batch.id == batch_id).where(or_(
            Batch.state.in_(list(only_from)), and_(Batch.state == state, mine))).values(values)
        with self._write() as session:
            if rowcount(session.execute(query, execution_options=NO_SYNC)) != 1:
                if session.get(Batch, batch_id) is None:
                    raise UnknownBatch(batch_id)
                return False
            if report is not None:
                write_verdicts(session, batch_id=batch_id, report=report)
            return True

    def start(self, batch_id: str, *, host: str) -> bool:
        """Its runner takes the batch: `running` from queued (or running still, a resumed
        batch); False when it ended meanwhile (cancelled while queued): nothing may run then,
        and its state stays the one its canceller set."""
        return self.set_state(batch_id, "running", host=host, only_from=ACTIVE_STATES)

    def request_cancel(self, batch_id: str) -> bool:
        """Flag the batch for cancelling; False when there is no such batch."""
        return self._update(batch_id, cancel_requested=True)

    def is_cancel_requested(self, batch_id: str) -> bool:
        with self._read() as session:
            query = select(Batch.cancel_requested).where(Batch.id == batch_id)
            return bool(session.scalar(query))

    def set_thread(self, batch_id: str, channel: str, thread_ts: str) -> None:
        if not self._update(batch_id, channel=channel, thread_ts=thread_ts):
            raise UnknownBatch(batch_id)

    def delete_batch(self, batch_id: str) -> bool:
        """Delete a batch and its runs; False when there was none."""
        query = delete(Batch).where(Batch.id == batch_id)
        with self._write() as session:
            return rowcount(session.execute(query, execution_options=NO_SYNC)) == 1

    def count_ahead(self, row: BatchRow) -> int:
        """Running batches and older queued ones on the row's queue, counted in SQL."""
        query = (
            select(func.count())
            .select_from(Batch)
            .where(
                Batch.queue == row.queue,
                Batch.id != row.id,
                or_(Batch.state == "running",
                    and_(Batch.state == "queued", Batch.created_at <= row.created_at)),
            )
        )
        with self._read() as session:
            return int(session.scalar(query) or 0)

    def _by_key(self, idempotency_key: str) -> BatchRow | None:
        with self._read() as session:
            query = select(Batch).where(Batch.idempotency_key == idempotency_key)
            batch = session.scalars(query).first()
            return None if batch is None else to_batch_row(batch)


def _state_values(state: str, *, at: datetime, error: str | None, host: str | None
                  ) -> dict[str, Any]:
    """The batch columns a move to `state` writes (`set_state`, `end`): finished_at stamped for
    a terminal state and cleared otherwise; error and host only when given."""
    values: dict[str, Any] = {"state": state,
                              "finished_at": at if state in TERMINAL_STATES else None}
    if error is not None:
        values["error"] = error
    if host is not None:
        values["host"] = host
    return values
