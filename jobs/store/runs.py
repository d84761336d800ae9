"""The store's run records: one row per (batch, approach), the record kept as its JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, or_, select, update
from sqlalchemy.dialects import sqlite

from jobs.core.digest import hardware, judged_results
from jobs.core.memory import PastRun, config_key, failed_in_bench, stack_key
from jobs.core.memory import bench_key as bench_key_of
from jobs.core.records import RunRecord, to_record
from jobs.core.sweeps import GridPoints
from jobs.core.verdicts import median
from jobs.store.database import Database, json_path
from jobs.store.schema import Batch, Run

# Run statuses that leave an approach to run again when an interrupted batch resumes.
RERUN_STATUSES = frozenset({"cancelled", "skipped"})
_RUN_UPDATES = ("position", "role", "status", "record", "started_at", "finished_at",
                "config_key", "stack_key", "bench_key", "value", "hardware")
DEAD_END_LOOKBACK = 20  # earlier failures of one configuration looked at, newest first


class Runs(Database):
    """Writing and reading a batch's run records."""

    def put_record(self, record: RunRecord, *, position: int, stack: str = "") -> None:
        """Store one run; a record for the same (batch, stack, approach) replaces the earlier
        one. `stack`: '' for the batch's own stack, else the stack an upgrade check runs every
        configuration on again (docs/contracts.md "Stacks")."""
        self.put_records([(position, record)], stack=stack)

    def put_records(self, records: Sequence[tuple[int, RunRecord]], *, stack: str = "") -> None:
        """Store (position, record) pairs in one transaction: all of them or none."""
        if not records:
            return
        with self._write() as session:
            metrics = _metrics_of(session, {r.batch for _, r in records})
            rows = {(r.batch, r.approach): {**_run_values(position, r, metrics.get(r.batch)),
                                            "stack": stack}
                    for position, r in records}
            session.execute(_upsert_runs(self._engine.dialect.name), list(rows.values()))

    def records(self, batch_id: str, *, stack: str = "") -> list[RunRecord]:
        """The batch's run records in preset order, on its own stack (or on `stack`, the one an
        upgrade check compares it with)."""
        query = (
            select(Run.approach, Run.record)
            .where(Run.batch_id == batch_id, Run.stack == stack)
            .order_by(Run.position, Run.id)
        )
        with self._read() as session:
            rows = session.execute(query).all()
        return [to_record(json.loads(data), where=f"{batch_id}/{name}") for name, data in rows]

    def last_run_of(self, server_args: dict[str, Any], env: dict[str, str], stack: str, *,
                    bench: str, not_in: str) -> PastRun | None:
        """The newest run of this configuration on this stack in another batch, whatever its
        status, but a failure of its benchmark under other bench settings (`bench`: the bench
        settings' key; one indexed query)."""
        query = (
            select(Run.batch_id, Run.approach, Run.record, Run.bench_key)
            .where(Run.config_key == config_key(server_args, env), Run.stack_key == stack,
                   Run.batch_id != not_in, Run.status.notin_(sorted(RERUN_STATUSES)),
                   or_(Run.bench_key.is_(None), Run.bench_key == bench))
            .order_by(Run.finished_at.desc(), Run.id.desc())
            .limit(1)
        )
        with self._read() as session:
            row = session.execute(query).first()
        return None if row is None else _past_run(*row)

    def failures_of(self, server_args: dict[str, Any], env: dict[str, str], *, bench: str,
                    not_in: str) -> list[PastRun]:
        """Earlier failed runs of this very configuration in other batches, newest first, but
        failures of the benchmark under other bench settings (one indexed query; the caller
        judges their causes and stacks)."""
        query = (
            select(Run.batch_id, Run.approach, Run.record, Run.bench_key)
            .where(Run.config_key == config_key(server_args, env), Run.status == "failed",
                   Run.batch_id != not_in,
                   or_(Run.bench_key.is_(None), Run.bench_key == bench))
            .order_by(Run.finished_at.desc(), Run.id.desc())
            .limit(DEAD_END_LOOKBACK)
        )
        with self._read() as session:
            rows = session.execute(query).all()
        return [_past_run(*row) for row in rows]


def write_verdicts(session: Any, *, batch_id: str, report: dict[str, Any]) -> None:
    """The report's judgement on the batch's runs (the digest's columns): each run's verdict,
    and its delta_pct when it counts as judged (`judged_results`; a sweep's points never do,
    their confirmation batch judges the winner). Inside the caller's transaction: `Store.end`
    writes the batch's end, its report and these in one."""
    points: frozenset[str] = frozenset()
    if report.get("sweep"):
        plan = session.scalar(select(Batch.plan).where(Batch.id == batch_id))
        points = sweep_points_of(plan)
    values = verdict_values(batch_id, report, points)
    if values:
        session.execute(verdict_update(), values)


def sweep_points_of(plan: str | None) -> frozenset[str]:
    """A stored plan's sweep points (JSON text): its grid's, named without building a plan (a
    plan stored before points were made on demand lists them)."""
    data = json.loads(plan or "{}")
    if data.get("points"):
        return frozenset(str(p.get("approach")) for p in data["points"])
    sweep = data.get("sweep") or {}
    if not sweep.get("grid"):
        return frozenset()
    return frozenset(p.approach for p in GridPoints(str(sweep.get("name")), sweep["grid"]))


def verdict_update() -> Any:
    """The statement `verdict_values` feeds (executemany)."""
    table = cast(Table, Run.__table__)  # Core, not the ORM's bulk update by primary key
    runs = table.c
    return (update(table)
            .where(runs.batch_id == bindparam("b_batch"), runs.approach == bindparam("b_approach"),
                   runs.stack == "")
            .values(verdict=bindparam("b_verdict"), judged_delta=bindparam("b_delta")))


def verdict_values(batch_id: str, report: dict[str, Any],
                   points: frozenset[str]) -> list[dict[str, Any]]:
    counted = judged_results(report, points=points)
    return [{"b_batch": batch_id, "b_approach": str(res.get("approach")),
             "b_verdict": res.get("verdict"),
             "b_delta": counted[name][1] if (name := str(res.get("approach"))) in counted
             else None}
            for res in report.get("results") or []]


def _metrics_of(session: Any, batch_ids: set[str]) -> dict[str, str]:
    """Each batch's metric, read from its stored plan by the database (the run's value is
    measured on it; a sweep's plan is large, and this runs with every record)."""
    metric = json_path(Batch.plan, ("metric",), dialect=session.get_bind().dialect.name)
    found = session.execute(select(Batch.id, metric).where(Batch.id.in_(sorted(batch_ids))))
    return {batch_id: str(name) for batch_id, name in found.all() if name is not None}


def run_measure(record: RunRecord, metric: str | None) -> dict[str, Any]:
    """The digest's columns of a run: its median on `metric` when it is ok, its hardware."""
    value = median(record.samples(metric)) if metric and record.status == "ok" else None
    return {"value": value, "hardware": hardware(record)}


def _run_values(position: int, record: RunRecord, metric: str | None) -> dict[str, Any]:
    return {
        **run_measure(record, metric),
        "batch_id": record.batch, "position": position, "approach": record.approach,
        "role": record.role, "status": record.status, "record": record.to_json(),
        "started_at": _parse_time(record.started_at),
        "finished_at": _parse_time(record.finished_at),
        "config_key": config_key(record.server_args, record.env),
        "stack_key": stack_key(record.fingerprint, engine=record.engine),
        "bench_key": run_bench_key(record),
    }


def _past_run(batch: str, approach: str, data: str, bench: str | None) -> PastRun:
    return PastRun(record=to_record(json.loads(data), where=f"{batch}/{approach}"),
                   bench_key=bench)


def run_bench_key(record: RunRecord) -> str | None:
    """The `bench_key` column of a run: its bench settings' key when its benchmark failed."""
    if not failed_in_bench(record):
        return None
    settings = record.extra.get("bench")
    return bench_key_of(settings if isinstance(settings, dict) else {})


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None  # the record keeps the original text; the column is only an index aid
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


def _upsert_runs(dialect: str) -> Any:
    if dialect == "postgresql":
        # PostgreSQL's dialect is imported where a PostgreSQL store uses it: 35 ms of every
        # process's start on the embedded SQLite default, which never does.
        from sqlalchemy.dialects import postgresql

        pg = postgresql.insert(Run)
        return pg.on_conflict_do_update(
            index_elements=[Run.batch_id, Run.stack, Run.approach],
            set_={name: pg.excluded[name] for name in _RUN_UPDATES},
        )
    if dialect == "sqlite":
        lite = sqlite.insert(Run)
        return lite.on_conflict_do_update(
            index_elements=[Run.batch_id, Run.stack, Run.approach],
            set_={name: lite.excluded[name] for name in _RUN_UPDATES},
        )
    raise NotImplementedError(f"the store supports SQLite and PostgreSQL, not {dialect}")
