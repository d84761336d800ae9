"""The digest's memory across batches (SPEC.md "Memory across batches"), pure: the judged results
the best configurations are made of, the regressions between consecutive batches of a preset
with the stack change that came with them, the known dead ends skipped and the GPU-hours that
saved, the GPU-hours spent per preset, and the dead ends an upgrade re-opened. `Memory` is what
the store's queries (`jobs.store.digest_queries`) serve from before the digest's window.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs.core.memory import DETERMINISTIC, known_from
from jobs.core.records import RunRecord
from jobs.core.rules import RuleSet, cause_of
from jobs.core.verdicts import Metric, change_pct, compare, is_better, median

if TYPE_CHECKING:
    from jobs.store import BatchRow

# What a regression names when it moved, and what tells a host type's stacks apart.
STACK_KEYS = ("driver", "cuda", "torch", "sglang", "nccl", "gpu", "compute_capability")
HOST_TYPE = ("gpu", "compute_capability")
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


def measured(
    rows: Sequence[BatchRow], records: Mapping[str, Sequence[RunRecord]]
) -> Iterator[tuple[BatchRow, RunRecord, str, bool, float]]:
    """Every ok run of `rows` with a value on its batch's metric: (row, record, metric,
    lower_is_better, median value)."""
    for row in rows:
        metric, lower = row.plan.metric, row.plan.lower_is_better
        for record in records.get(row.id, ()):
            value = median(record.samples(metric))
            if record.status == "ok" and value is not None:
                yield row, record, metric, lower, value


# --------------------------------------------------------------------------- memory across batches


def gpu_hours(record: RunRecord) -> float | None:
    """Server-up time (finished_at - started_at) × the fingerprint's gpu_count (1 when absent);
    None without both times."""
    began, ended = _time(record.started_at), _time(record.finished_at)
    if began is None or ended is None or ended < began:
        return None
    count = record.fingerprint.get("gpu_count")
    gpus = count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1
    return (ended - began).total_seconds() / 3600.0 * gpus


def _time(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.replace(tzinfo=dt.UTC) if parsed.tzinfo is None else parsed


def stack_change(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each stack component (STACK_KEYS) whose value differs between two fingerprints."""
    return [
        {"key": key, "from": old.get(key), "to": new.get(key)}
        for key in STACK_KEYS
        if old.get(key) != new.get(key) and str(old.get(key)) != str(new.get(key))
    ]


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
        dead_ends=[(at, rec) for at, rec in latest.values() if rec.status in FAILED],
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
        "regressions": regressions(rows, records, since=since, now=now),
        "dead_ends_skipped": dead_ends_skipped(window, records, origins=origins),
        "gpu_hours": gpu_hours_per_preset(window, records),
        "reopened": reopened_dead_ends(window, records, dead_ends=memory.dead_ends,
                                       rules=rules),
    }


def regressions(
    rows: Sequence[BatchRow],
    records: Mapping[str, Sequence[RunRecord]],
    *,
    since: dt.datetime,
    now: dt.datetime,
) -> list[dict[str, Any]]:
    """A preset's baseline, or its best judged configuration (never an inconclusive or
    confounded run), that regressed beyond its noise from one batch to the next (the later one
    in the window, the earlier possibly before it). Noise mirrors the verdict rules
    (`verdicts.compare`): at least the later plan's min_effect_pct worse, and with 2+
    repetitions on both sides, disjoint [min, max] ranges."""
    by_preset: dict[str, list[BatchRow]] = {}
    for row in sorted((r for r in rows if r.created_at <= now), key=lambda r: r.created_at):
        by_preset.setdefault(row.preset, []).append(row)
    out: list[dict[str, Any]] = []
    for preset in sorted(by_preset):
        for what, pick in (("baseline", _baseline_of), ("best", _best_of)):
            held: tuple[BatchRow, RunRecord] | None = None
            for row in by_preset[preset]:
                record = pick(row, records.get(row.id, ()))
                if record is None:
                    continue
                if held is not None and row.created_at >= since:
                    moved = _regressed(held, (row, record), what=what)
                    if moved is not None:
                        out.append(moved)
                held = (row, record)
    return out


def _baseline_of(row: BatchRow, records: Sequence[RunRecord]) -> RunRecord | None:
    metric = row.plan.metric
    return next((r for r in records if r.role == "baseline" and r.status == "ok"
                 and r.samples(metric)), None)


def _best_of(row: BatchRow, records: Sequence[RunRecord]) -> RunRecord | None:
    """The batch's best approach among those its report judged (a confounded or inconclusive
    run's value says nothing about the stack)."""
    judged_here = {j.approach for j in judged([row], {row.id: records})}
    best: tuple[float, RunRecord] | None = None
    for _, record, _, lower, value in measured([row], {row.id: records}):
        if record.approach not in judged_here:
            continue
        if best is None or is_better(value, best[0], lower_is_better=lower):
            best = (value, record)
    return None if best is None else best[1]


def _regressed(
    before: tuple[BatchRow, RunRecord], after: tuple[BatchRow, RunRecord], *, what: str
) -> dict[str, Any] | None:
    (old_row, old), (new_row, new) = before, after
    plan = new_row.plan
    if (old_row.plan.metric, old_row.plan.lower_is_better) != (plan.metric, plan.lower_is_better):
        return None  # a different yardstick: no move to judge
    if what == "best" and old.role == new.role == "baseline":
        return None  # the baseline's own line says it
    samples, base = new.samples(plan.metric), old.samples(plan.metric)
    value, base_value = median(samples), median(base)
    assert value is not None and base_value is not None
    raw = change_pct(value, base_value, lower_is_better=plan.lower_is_better)
    metric = Metric(name=plan.metric, min_effect_pct=plan.min_effect_pct,
                    lower_is_better=plan.lower_is_better)
    delta = None if raw is None else round(raw, 1)
    if compare(samples, base, metric=metric, value=value, delta=delta).verdict != "regressed":
        return None
    return {
        "preset": new_row.preset, "what": what, "metric": plan.metric, "delta_pct": delta,
        "from": {"batch": old_row.id, "approach": old.approach, "value": base_value},
        "to": {"batch": new_row.id, "approach": new.approach, "value": value},
        "stack": stack_change(old.fingerprint, new.fingerprint),
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
            saved = None if origin is None else gpu_hours(origin)
            runs.append({"batch": row.id, "preset": row.preset, "approach": record.approach,
                         "known_from": earlier,
                         "gpu_hours": None if saved is None else round(saved, 2)})
    total = sum(r["gpu_hours"] for r in runs if r["gpu_hours"] is not None)
    return {"count": len(runs), "gpu_hours": round(total, 2), "runs": runs}


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


def gpu_hours_per_preset(
    window: Sequence[BatchRow], records: Mapping[str, Sequence[RunRecord]]
) -> list[dict[str, Any]]:
    """GPU-hours the window's runs took, per preset. A known dead end started nothing and a
    run without both times (skipped, never started) took nothing: neither counts."""
    spent: dict[str, list[float]] = {}
    for row in window:
        for record in records.get(row.id, ()):
            hours = None if known_from(record) else gpu_hours(record)
            if hours is not None:
                spent.setdefault(row.preset, []).append(hours)
    return [{"preset": preset, "gpu_hours": round(sum(hours), 2), "runs": len(hours)}
            for preset, hours in sorted(spent.items())]


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
        if seen is None or seen[0] <= at or record.status not in FAILED:
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
