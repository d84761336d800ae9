"""The digest's memory across batches (docs/contracts.md "Memory across batches"), pure: the judged
results the best configurations are made of, the known dead ends skipped and the hours that saved,
the hours spent per preset (`jobs.core.digest`: GPU-hours, or CPU-hours where there is no GPU), and
the dead ends an upgrade re-opened. The regressions between consecutive experiments are
`jobs.core.digest`'. `Memory` is what the store's queries (`jobs.store.digest_queries`) serve from
before the digest's window.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobs.core.digest._digest_hours import hours_per_preset, hours_unit, run_hours
from jobs.core.memory import DETERMINISTIC, known_from, reached_a_level
from jobs.core.plans import BatchRow
from jobs.core.records import RunRecord
from jobs.core.rules import RuleSet, cause_of
from jobs.core.stack import HOST_TYPE, Stack

# What a regression names when it moved, and what tells a host type's stacks apart.
FAILED = ("failed", "timeout")


CONCLUSIVE = ("improved", "unchanged", "regressed")  # judged against the batch's own baseline


@dataclass(frozen=True)
class Judged:
    """One judged result of a stored report (improved, unchanged or regressed against its own
    batch's baseline) with the hardware it ran on: what the best configuration is made of.
    `delta_pct` is the report's (positive: better); `value` the approach's median."""

    preset: str
    hardware: str
    approach: str
    batch: str
    metric: str
    verdict: str
    delta_pct: float
    value: float | None
    created_at: dt.datetime


@dataclass(frozen=True)
class Memory:
    """What the digest needs from before its window, as the store's queries return it.

    `earlier`: per (preset, hardware), at least the best judged result before the window (the
    best configuration's "previous"), oldest first. `origins`: the records that known dead ends
    of the window repeat, by (batch, approach). `dead_ends`: each (preset, approach)'s latest
    record up to now when it failed, with its batch's creation time. `rows`/`records` passed
    next to it hold the window's batches plus the few earlier ones regressions and next steps
    need.
    """

    earlier: Sequence[Judged] = ()
    origins: Mapping[tuple[str, str], RunRecord] | None = None
    dead_ends: Sequence[tuple[dt.datetime, RunRecord]] = ()


def hardware(record: RunRecord) -> str:
    """The host's hardware as the digest names it: "8x NVIDIA H200", or for a host without a GPU
    "CPU (its model)" — never "0x none"."""
    return hardware_of(record.fingerprint)


def hardware_of(fp: Mapping[str, Any]) -> str:
    gpu, count = fp.get("gpu"), fp.get("gpu_count")
    if gpu is None and count is None:
        return "unknown hardware"
    if count != 0 and not str(gpu).startswith("none"):
        return f"{count if isinstance(count, int) else '?'}x {gpu or 'unknown GPU'}"
    model = fp.get("cpu")
    if not model and isinstance(gpu, str) and gpu.startswith("none (CPU:"):
        model = gpu.removeprefix("none (CPU:").rstrip(")").strip()
    name = fp.get("hostname") or model
    return f"CPU ({name})" if name else "CPU (model unknown)"


def sweep_points(row: BatchRow) -> frozenset[str]:
    """A sweep batch's points: each judged by the sweep's few repetitions only; the confirmation
    batch judges the winner, so they never count as judged here."""
    sweep = row.plan.sweep
    return frozenset(p.approach for p in sweep.points) if sweep is not None else frozenset()


def judged_results(
    report: Mapping[str, Any] | None, *, points: frozenset[str] = frozenset()
) -> dict[str, tuple[str, float, float | None]]:
    """The report's results that count as judged, by approach: (verdict, delta_pct, value) for
    verdict improved, unchanged or regressed with a delta. Inconclusive (confounded, noisy),
    failed, cancelled and skipped results never count, nor `points` (a sweep's, unconfirmed).
    The store keeps these on the runs (`judged_delta`, written with the report)."""
    out: dict[str, tuple[str, float, float | None]] = {}
    for res in (report or {}).get("results") or []:
        delta, name, value = res.get("delta_pct"), res.get("approach"), res.get("value")
        if res.get("verdict") not in CONCLUSIVE or delta is None or name in points:
            continue
        out[str(name)] = (str(res["verdict"]), float(delta),
                          None if value is None else float(value))
    return out


def judged(
    rows: Sequence[BatchRow], records: Mapping[str, Sequence[RunRecord]]
) -> list[Judged]:
    """Every judged result (`judged_results`) of the rows' reports, in row and report order.
    The hardware is the approach's record's (the baseline's when it has none)."""
    out: list[Judged] = []
    for row in rows:
        runs = {r.approach: r for r in records.get(row.id, ())}
        for name, (verdict, delta, value) in judged_results(
                row.report, points=sweep_points(row)).items():
            record = runs.get(name) or runs.get("baseline")
            out.append(Judged(
                preset=row.preset, hardware="unknown hardware" if record is None
                else hardware(record), approach=name, batch=row.id, metric=row.plan.metric,
                verdict=verdict, delta_pct=delta, value=value, created_at=row.created_at))
    return out


# --------------------------------------------------------------------------- memory across batches


def stack_change(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each stack component (jobs.core.stack) whose value differs between two fingerprints."""
    return [{"key": key, "from": a, "to": b}
            for key, a, b in Stack.of(old).changes(Stack.of(new))]


def memory_of(
    rows: Sequence[BatchRow],
    records: Mapping[str, Sequence[RunRecord]],
    *,
    since: dt.datetime,
    now: dt.datetime,
) -> Memory:
    """The `Memory` of a whole history held in memory (what the store's queries serve)."""
    ordered = sorted((r for r in rows if r.created_at <= now), key=lambda r: r.created_at)
    latest: dict[tuple[str, str], tuple[dt.datetime, RunRecord]] = {}
    for row in ordered:
        for record in records.get(row.id, ()):
            latest[(row.preset, record.approach)] = (row.created_at, record)
    return Memory(
        earlier=judged([r for r in ordered if r.created_at < since], records),
        origins={(rec.batch, rec.approach): rec for recs in records.values() for rec in recs},
        dead_ends=[(at, rec) for at, rec in latest.values()
                   if rec.status in FAILED and not reached_a_level(rec)],
    )


def memory_sections(
    rows: Sequence[BatchRow],
    records: Mapping[str, Sequence[RunRecord]],
    *,
    memory: Memory,
    since: dt.datetime,
    now: dt.datetime,
    rules: RuleSet,
) -> dict[str, Any]:
    window = sorted((r for r in rows if since <= r.created_at <= now),
                    key=lambda r: r.created_at)
    origins = memory.origins or {}
    return {
        "dead_ends_skipped": dead_ends_skipped(window, records, origins=origins),
        "hours": hours_per_preset(window, records),
        "reopened": reopened_dead_ends(window, records, dead_ends=memory.dead_ends,
                                       rules=rules),
    }


def dead_ends_skipped(
    window: Sequence[BatchRow],
    records: Mapping[str, Sequence[RunRecord]],
    *,
    origins: Mapping[tuple[str, str], RunRecord],
) -> dict[str, Any]:
    """The window's known dead ends (not started), each with the GPU-hours its origin (the
    earlier failed run it repeats) took: what not starting it saved."""
    runs: list[dict[str, Any]] = []
    for row in window:
        for record in records.get(row.id, ()):
            earlier = known_from(record)
            if earlier is None:
                continue
            origin = origin_of(record, origins)
            saved = None if origin is None else run_hours(origin)
            runs.append({"batch": row.id, "preset": row.preset, "approach": record.approach,
                         "known_from": earlier,
                         "hours": None if saved is None else round(saved, 2),
                         "unit": hours_unit(origin or record)})
    saved_by_unit: dict[str, float] = {}
    for r in runs:
        if r["hours"] is not None:
            saved_by_unit[r["unit"]] = saved_by_unit.get(r["unit"], 0.0) + r["hours"]
    return {"count": len(runs), "runs": runs,
            "saved": [{"unit": unit, "hours": round(hours, 2)}
                      for unit, hours in sorted(saved_by_unit.items())]}


MAX_HOPS = 10  # a known dead end names its origin; older stores may chain a few


def origin_of(
    record: RunRecord, origins: Mapping[tuple[str, str], RunRecord]
) -> RunRecord | None:
    """The run a known dead end repeats: the same approach in its `known_from` batch, followed
    while that one is itself a known dead end."""
    current = record
    for _ in range(MAX_HOPS):
        batch = known_from(current)
        if batch is None:
            return current if current is not record else None
        found = origins.get((batch, current.approach))
        if found is None:
            return None
        current = found
    return None


def host_type(fingerprint: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(fingerprint.get(k)) for k in HOST_TYPE)


def reopened_dead_ends(
    window: Sequence[BatchRow],
    records: Mapping[str, Sequence[RunRecord]],
    *,
    dead_ends: Sequence[tuple[dt.datetime, RunRecord]],
    rules: RuleSet,
) -> list[dict[str, Any]]:
    """Approaches whose latest record failed with a deterministic cause on a stack older than
    the newest one the window saw on the same host type (gpu, compute capability): the upgrade
    may have fixed it, so they are worth re-running."""
    newest: dict[tuple[str, ...], tuple[dt.datetime, RunRecord]] = {}
    for row in window:
        for record in records.get(row.id, ()):
            if record.fingerprint.get("gpu") is not None:
                newest[host_type(record.fingerprint)] = (row.created_at, record)
    out = []
    for at, record in sorted(dead_ends, key=lambda item: (item[1].preset, item[1].approach)):
        seen = newest.get(host_type(record.fingerprint))
        if seen is None or seen[0] <= at or record.status not in FAILED \
                or reached_a_level(record):
            continue
        changes = stack_change(record.fingerprint, seen[1].fingerprint)
        if not changes:
            continue
        cause, line = cause_of(log_tail=record.log_tail, status=record.status, rules=rules)
        if cause not in DETERMINISTIC:
            continue
        out.append({"preset": record.preset, "approach": record.approach,
                    "batch": record.batch, "cause": cause, "evidence": line,
                    "stack": changes, "newer_batch": seen[1].batch})
    return out
