"""A sweep and its confirmation are one experiment (docs/contracts.md "A sweep and its confirmation
are one experiment"): the queries that list what a person started.

A confirmation batch is created by its sweep batch with the idempotency key
`confirm:<sweep batch>` (`confirmation_key`), so it is told apart in SQL without decoding a plan;
`show`'s latest batch, `compare`'s defaults, `history` and `status` leave it out and fold it into
its sweep (`confirmation_of`); so too a bisection's parts (`part_key`), which its report
lists. Module-level functions take any store, as `comparisons` does.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, or_, select

from jobs.core.plans import PROBE
from jobs.store.database import Database
from jobs.store.schema import Batch, BatchRow, to_batch_row

CONFIRM_PREFIX = "confirm:"
PART_PREFIX = "part:"


def confirmation_key(sweep_batch: str) -> str:
    """The idempotency key of a sweep batch's confirmation (one per sweep, found again by it)."""
    return f"{CONFIRM_PREFIX}{sweep_batch}"


def part_key(batch: str, part: str) -> str:
    """The idempotency key of a batch another runs as one of its parts (a bisection's batch on
    one stack: docs/contracts.md "Stacks"), found again when that batch resumes."""
    return f"{PART_PREFIX}{batch}:{part}"


def is_experiment() -> ColumnElement[bool]:
    """True for a batch a person started (not a sweep's confirmation, nor a bisection's part)."""
    return or_(Batch.idempotency_key.is_(None),
               Batch.idempotency_key.not_like(f"{CONFIRM_PREFIX}%")
               & Batch.idempotency_key.not_like(f"{PART_PREFIX}%"))


def is_not_probe() -> ColumnElement[bool]:
    """True for a batch that ran configurations, not a queued collectives probe (whose row
    names `probe` as its engine: `jobs.core.plans.PROBE`)."""
    return Batch.engine != PROBE


def latest_experiment(store: Database) -> BatchRow | None:
    """The newest batch a person started (after a sweep: the sweep batch, not its
    confirmation)."""
    query = (select(Batch).where(is_experiment())
             .order_by(Batch.created_at.desc(), Batch.id.desc()).limit(1))
    with store._read() as session:
        batch = session.scalars(query).first()
        return None if batch is None else to_batch_row(batch)


def recent_experiments(store: Database, *, limit: int) -> list[BatchRow]:
    """The `limit` newest batches a person started, newest first."""
    query = (select(Batch).where(is_experiment())
             .order_by(Batch.created_at.desc(), Batch.id.desc()).limit(limit))
    with store._read() as session:
        return [to_batch_row(batch) for batch in session.scalars(query)]


def confirmation_of(store: Database, sweep_batch: str) -> BatchRow | None:
    """The sweep batch's confirmation batch, once it was created."""
    query = select(Batch).where(Batch.idempotency_key == confirmation_key(sweep_batch))
    with store._read() as session:
        batch = session.scalars(query).first()
        return None if batch is None else to_batch_row(batch)
