"""The digest's reads: the window's batches and runs, and only the earlier rows each section
needs, in a handful of queries on indexed columns (batches.created_at, batches.preset, the
runs' (batch_id, approach) key) instead of every batch with every record decoded.

One read still covers the whole history, by the digest's own definition: the best configuration
per preset and hardware is the judged result with the largest delta ever, and its "previous"
the best before the window. `judged_before` scans the runs' narrow judged columns (written with
each report) and keeps one winner per preset and hardware.

Module-level functions take the store; `DigestQueries` mixes the same into `Store`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import and_, func, select

from jobs.core.digest import STEP_LOOKBACK, Judged, Memory
from jobs.core.memory import known_from
from jobs.core.plans import BatchRow
from jobs.core.records import RunRecord, to_record
from jobs.store.database import Database, json_path
from jobs.store.experiments import confirmation_key, is_experiment, is_not_probe
from jobs.store.schema import Batch, Run, to_batch_row

PREDECESSORS = 3  # earlier experiments per preset the window's first may be compared with
MAX_HOPS = 10  # known dead ends name their origin; an older store may chain a few

Records = dict[str, list[RunRecord]]


def digest_inputs(
    store: Database, *, since: dt.datetime, now: dt.datetime
) -> tuple[list[BatchRow], Records, Memory]:
    """Everything `build_digest` reads: the window's batches plus, per preset, the few before
    it and its recent reports; their records; and the `Memory` of earlier judged results."""
    rows, records = window(store, since=since, now=now)
    presets = sorted({row.preset for row in rows})
    earlier = predecessors(store, presets=presets, before=since)
    held = {row.id for row in rows}
    more = list({row.id: row for row in [*earlier, *recent_reports(store, now=now)]
                 if row.id not in held}.values())
    # the next steps need the recent reports' rows only; the regressions, the earlier records
    records.update(records_of(store, [row.id for row in earlier]))
    everything = sorted([*rows, *more], key=lambda r: (r.created_at, r.id))
    memory = Memory(
        earlier=judged_before(store, since=since),
        origins=origins(store, [rec for recs in records.values() for rec in recs]),
        dead_ends=dead_ends(store, now=now),
    )
    return everything, records, memory


def window(
    store: Database, *, since: dt.datetime, now: dt.datetime
) -> tuple[list[BatchRow], Records]:
    """The batches created in [since, now], oldest first, and their records (two queries)."""
    in_window = and_(Batch.created_at >= since, Batch.created_at <= now, is_not_probe())
    batches = select(Batch).where(in_window).order_by(Batch.created_at, Batch.id)
    runs = (
        select(Run.batch_id, Run.approach, Run.record)
        .join(Batch, Batch.id == Run.batch_id)
        .where(in_window, Run.stack == "")  # a batch's own stack (docs/contracts.md "Stacks")
        .order_by(Run.batch_id, Run.position, Run.id)
    )
    with store._read() as session:
        rows = [to_batch_row(batch) for batch in session.scalars(batches)]
        found = session.execute(runs).all()
    return rows, _records(found, ids=[row.id for row in rows])


def records_of(store: Database, batch_ids: Sequence[str]) -> Records:
    """The records of these batches, in preset order (one query on the runs' batch key)."""
    if not batch_ids:
        return {}
    query = (
        select(Run.batch_id, Run.approach, Run.record)
        .where(Run.batch_id.in_(list(batch_ids)), Run.stack == "")
        .order_by(Run.batch_id, Run.position, Run.id)
    )
    with store._read() as session:
        found = session.execute(query).all()
    return _records(found, ids=batch_ids)


def predecessors(
    store: Database, *, presets: Iterable[str], before: dt.datetime, limit: int = PREDECESSORS
) -> list[BatchRow]:
    """Per preset, the `limit` latest experiments created before `before` (batches a person
    started), each with its sweep's confirmation: one experiment (docs/contracts.md)."""
    out: list[BatchRow] = []
    with store._read() as session:
        for preset in presets:
            query = (
                select(Batch)
                .where(Batch.preset == preset, Batch.created_at < before, is_experiment())
                .order_by(Batch.created_at.desc(), Batch.id.desc())
                .limit(limit)
            )
            out.extend(to_batch_row(batch) for batch in session.scalars(query))
        keys = [confirmation_key(row.id) for row in out if row.plan.sweep is not None]
        if keys:
            query = select(Batch).where(Batch.idempotency_key.in_(keys))
            out.extend(to_batch_row(batch) for batch in session.scalars(query))
    return out


def recent_reports(store: Database, *, now: dt.datetime,
                   limit: int = STEP_LOOKBACK) -> list[BatchRow]:
    """Each preset's `limit` latest batches with a report, created by `now` (the next steps
    carried until a later batch settles them): one query, ranked per preset by the database on
    the (preset, created_at) index."""
    rank = func.row_number().over(partition_by=Batch.preset,
                                  order_by=(Batch.created_at.desc(), Batch.id.desc()))
    ranked = (
        select(Batch.id, rank.label("rank"))
        .where(Batch.report.is_not(None), Batch.created_at <= now, is_not_probe())
        .subquery()
    )
    query = (
        select(Batch)
        .join(ranked, ranked.c.id == Batch.id)
        .where(ranked.c.rank <= limit)
        .order_by(Batch.created_at, Batch.id)
    )
    with store._read() as session:
        return [to_batch_row(batch) for batch in session.scalars(query)]


def judged_before(store: Database, *, since: dt.datetime) -> list[Judged]:
    """Per (preset, hardware), the judged result with the largest delta among the batches
    created before `since` (the best configuration's "previous"), chosen as
    `best_configurations` would over all of them (the earlier holds a tie). It reads the runs'
    narrow `judged_delta`, `verdict`, `value` and `hardware` columns (written with each report,
    0006_run_verdicts), never a report or a record; the winners' metric and time come last."""
    query = (
        select(Batch.id, Batch.preset, Run.approach, Run.verdict, Run.judged_delta, Run.value,
               Run.hardware)
        .join(Run, Run.batch_id == Batch.id)
        .where(Batch.created_at < since, Run.judged_delta.is_not(None))
        .order_by(Batch.created_at, Batch.id, Run.position, Run.id)
    )
    with store._read() as session:
        found = session.execute(query).all()
    best: dict[tuple[str, str], Judged] = {}
    for batch_id, preset, approach, verdict, delta, value, hardware in found:
        key, held = (preset, str(hardware)), best.get((preset, str(hardware)))
        if delta is not None and (held is None or delta > held.delta_pct):
            best[key] = Judged(preset=preset, hardware=key[1], approach=approach,
                               batch=batch_id, metric="", verdict=str(verdict),
                               delta_pct=float(delta),
                               value=None if value is None else float(value), created_at=since)
    # Decoding a datetime (and a plan's metric) costs more than the rest of a row: only the
    # winners' are read.
    metric = json_path(Batch.plan, ("metric",), dialect=store._engine.dialect.name)
    query_at = select(Batch.id, Batch.created_at, metric).where(
        Batch.id.in_(sorted({m.batch for m in best.values()})))
    with store._read() as session:
        about = {b: (at, str(name)) for b, at, name in session.execute(query_at).all()}
    return sorted((dataclasses.replace(m, created_at=about[m.batch][0], metric=about[m.batch][1])
                   for m in best.values()), key=lambda m: m.created_at)


def origins(store: Database, records: Sequence[RunRecord]) -> dict[tuple[str, str], RunRecord]:
    """The earlier records that known dead ends among `records` repeat, by (batch, approach),
    followed while one is itself a known dead end (one query per hop)."""
    found: dict[tuple[str, str], RunRecord] = {}
    wanted = {(b, r.approach) for r in records if (b := known_from(r))}
    for _ in range(MAX_HOPS):
        wanted -= found.keys()
        if not wanted:
            break
        query = (
            select(Run.batch_id, Run.approach, Run.record)
            .where(Run.batch_id.in_(sorted({b for b, _ in wanted})),
                   Run.approach.in_(sorted({a for _, a in wanted})), Run.stack == "")
        )
        with store._read() as session:
            rows = session.execute(query).all()
        hop = {(b, a): to_record(json.loads(data), where=f"{b}/{a}")
               for b, a, data in rows if (b, a) in wanted}
        if not hop:
            break
        found.update(hop)
        wanted = {(b, r.approach) for r in hop.values() if (b := known_from(r))}
    return found


def dead_ends(store: Database, *, now: dt.datetime) -> list[tuple[dt.datetime, RunRecord]]:
    """Each (preset, approach)'s latest record up to `now` when it failed, with its batch's
    creation time: an aggregate in SQL, then only those failed records decoded."""
    latest = (
        select(Batch.preset, Run.approach, func.max(Batch.created_at).label("at"))
        .join(Run, Run.batch_id == Batch.id)
        .where(Batch.created_at <= now, Run.stack == "")
        .group_by(Batch.preset, Run.approach)
        .subquery()
    )
    query = (
        select(Batch.created_at, Run.batch_id, Run.approach, Run.record)
        .join(Run, Run.batch_id == Batch.id)
        .join(latest, and_(Batch.preset == latest.c.preset, Run.approach == latest.c.approach,
                           Batch.created_at == latest.c.at))
        .where(Run.status.in_(["failed", "timeout"]), Run.stack == "")
        .order_by(Batch.created_at, Batch.id, Run.position)
    )
    with store._read() as session:
        rows = session.execute(query).all()
    return [(at, to_record(json.loads(data), where=f"{b}/{a}")) for at, b, a, data in rows]


class DigestQueries(Database):
    """The digest's reads as store methods (mixed into `Store`)."""

    def digest_inputs(
        self, *, since: dt.datetime, now: dt.datetime
    ) -> tuple[list[BatchRow], Records, Memory]:
        return digest_inputs(self, since=since, now=now)


def _records(found: Sequence[Any], *, ids: Sequence[str]) -> Records:
    out: Records = {batch_id: [] for batch_id in ids}
    for batch_id, name, data in found:
        out.setdefault(batch_id, []).append(
            to_record(json.loads(data), where=f"{batch_id}/{name}"))
    return out
