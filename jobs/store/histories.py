"""The store's history of one configuration (docs/contracts.md "Noise, measured"): its
measurements in earlier batches on the same host and stack, measured the same way (the same
benchmark settings and metric), newest `HISTORY` of them: the spread a change across batches
is judged against (`jobs.core.noise.Spread`).

One indexed query (`ix_runs_config_key_status`) joined to the batches for their host, plan and
creation time; the plans are compared here, in Python, for the few rows it returns.
"""

from __future__ import annotations

import json

from sqlalchemy import and_, or_, select

from jobs.core.memory import config_key, stack_key
from jobs.core.noise import Point
from jobs.core.plans import BatchRow, to_plan
from jobs.core.records import RunRecord, to_record
from jobs.core.verdicts import median
from jobs.store.database import Database
from jobs.store.schema import Batch, Run

HISTORY = 20  # earlier batches looked at, newest first


class Histories(Database):
    """A configuration's earlier measurements."""

    def history_points(self, record: RunRecord, *, row: BatchRow) -> list[Point]:
        """`record`'s configuration in batches created before `row`'s, on its host and stack,
        with its bench settings and metric: each batch's median and range on the metric, oldest
        first (at most HISTORY)."""
        plan = row.plan
        query = (
            select(Run.batch_id, Run.approach, Run.record, Batch.plan)
            .join(Batch, Batch.id == Run.batch_id)
            .where(Run.config_key == config_key(record.server_args, record.env),
                   Run.stack_key == stack_key(record.fingerprint, engine=record.engine),
                   Run.status == "ok", Run.batch_id != row.id,
                   Batch.host.is_(None) if row.host is None else Batch.host == row.host,
                   or_(Batch.created_at < row.created_at,
                       and_(Batch.created_at == row.created_at, Batch.id < row.id)))
            .order_by(Batch.created_at.desc(), Batch.id.desc())
            .limit(HISTORY)
        )
        with self._read() as session:
            rows = session.execute(query).all()
        bench = config_key(plan.bench, {})
        points: list[Point] = []
        for batch_id, approach, data, plan_text in rows:
            earlier = to_plan(json.loads(plan_text))
            if (earlier.metric, earlier.lower_is_better, config_key(earlier.bench, {})) != (
                    plan.metric, plan.lower_is_better, bench):
                continue
            samples = to_record(json.loads(data), where=f"{batch_id}/{approach}").samples(
                plan.metric)
            value = median(samples)
            if value is not None:
                points.append(Point(batch=batch_id, value=value, low=min(samples),
                                    high=max(samples)))
        return points[::-1]

