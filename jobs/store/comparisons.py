"""The store's queries for `compare`: the latest reported batch (of a preset, before another).

Each is one indexed `ORDER BY created_at DESC, id DESC LIMIT 1` (ix_batches_created_at; with
a preset, `ix_batches_preset_created_at (preset, created_at)` keeps it so with many presets).
`Comparisons` is the mixin for `Store`; the module-level functions take any store and serve
until it is mixed in.
"""

from __future__ import annotations

from sqlalchemy import and_, or_, select

from jobs.store.database import Database, json_path
from jobs.store.experiments import is_experiment, is_not_probe
from jobs.store.schema import Batch, BatchRow, to_batch_row


class Comparisons(Database):
    """Batches picked for a comparison."""

    def latest_reported(
        self, *, preset: str | None = None, before: BatchRow | None = None
    ) -> BatchRow | None:
        return latest_reported(self, preset=preset, before=before)

    def recent_batch_ids(self, limit: int = 50) -> list[str]:
        return recent_batch_ids(self, limit=limit)


def latest_reported(
    store: Database, *, preset: str | None = None, before: BatchRow | None = None
) -> BatchRow | None:
    """The newest batch with a stored report (it ended), of `preset`, created before `before`
    (ties on created_at broken by ID, as `list_batches` orders them); never a sweep's
    confirmation, which is one experiment with its sweep, nor a probe, nor a bisection (its
    parts are the batches that measured)."""
    dialect = store._engine.dialect.name
    query = select(Batch).where(Batch.report.is_not(None), is_experiment(), is_not_probe(),
                                json_path(Batch.plan, ("bisect",), dialect=dialect).is_(None))
    if preset is not None:
        query = query.where(Batch.preset == preset)
    if before is not None:
        query = query.where(or_(
            Batch.created_at < before.created_at,
            and_(Batch.created_at == before.created_at, Batch.id < before.id),
        ))
    query = query.order_by(Batch.created_at.desc(), Batch.id.desc()).limit(1)
    with store._read() as session:
        batch = session.scalars(query).first()
        return None if batch is None else to_batch_row(batch)


def recent_batch_ids(store: Database, *, limit: int = 50) -> list[str]:
    """The IDs of the newest batches (for "did you mean"), without decoding their rows."""
    query = select(Batch.id).order_by(Batch.created_at.desc(), Batch.id.desc()).limit(limit)
    with store._read() as session:
        return list(session.scalars(query))
