"""The digest's trend as data: per preset and hardware, one point per experiment (a batch a person
started; a sweep and its confirmation are one), its best judged result as its delta against its
own batch's baseline (%), the same yardstick as the digest's best configuration
(`jobs.core.digest`): only improved, unchanged or regressed results count, never an absolute
median compared across batches, nor an inconclusive (confounded) or failed run, nor a sweep's
point on its own draws (its confirmed winner counts, with the confirmation's verdict). An
experiment with no such result but a mixed one (better at some load levels, worse at others) is
its mixed result, so that a preset whose results were all mixed still has its trend; a point
whose batch was cancelled says so (the chart keeps it off the line).

`jobs.charts.trend` draws it; `jobs.commands.digest` reads the store once for both.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any
from zoneinfo import ZoneInfo

from jobs.core.digest._digest_memory import Judged, hardware, judged, sweep_points
from jobs.core.digest._experiments import experiment_id
from jobs.core.plans import BatchRow, load_label
from jobs.core.records import RunRecord
from jobs.core.units import unit_of


def experiment_best(rows: Sequence[BatchRow], records: Mapping[str, Sequence[RunRecord]], *,
                    now: dt.datetime, days: float, tz: str = "UTC") -> list[dict[str, Any]]:
    """Per (preset, hardware) with a judged or mixed result in the window: one point per
    experiment, its largest judged `delta_pct` (the earlier result holds a tie), at the time the
    experiment started (`at`, in `tz`), oldest first. An experiment without a judged result but
    with a mixed one (by load level) gets that one, its levels' deltas in `levels`. `batch` is
    the experiment's (the sweep's, for a confirmed winner); `judged_in` the batch whose report
    judged it; `cancelled` when that batch was cancelled (its best is of what ran before)."""
    since = now - dt.timedelta(days=days)
    zone = ZoneInfo(tz)
    started = {row.id: row.created_at for row in rows}
    window = sorted((row for row in rows if since <= row.created_at <= now),
                    key=lambda r: (r.created_at, r.id))
    plans = {row.id: row for row in window}
    best: dict[tuple[str, str], dict[str, Any]] = {}
    found = [(point, None) for point in judged(window, records)] + mixed(window, records)
    for point, levels in found:
        experiment = experiment_id(plans[point.batch])
        at = started.get(experiment, point.created_at)
        series = best.setdefault((point.preset, point.hardware), {
            "preset": point.preset, "hardware": point.hardware, "metric": point.metric,
            "unit": unit_of(point.metric), "experiments": {}})
        held = series["experiments"].get(experiment)
        # a judged result before a mixed one, then the larger delta
        if held is None or (levels is None, point.delta_pct) > (
                held["levels"] is None, held["delta_pct"]):
            series["experiments"][experiment] = {
                "at": at.astimezone(zone).isoformat(timespec="minutes"),
                "day": at.astimezone(zone).date().isoformat(),
                "delta_pct": point.delta_pct, "value": point.value, "verdict": point.verdict,
                "approach": point.approach, "batch": experiment, "judged_in": point.batch,
                "cancelled": plans[point.batch].state == "cancelled", "levels": levels}
    return [
        {**{k: v for k, v in s.items() if k != "experiments"},
         "points": sorted(s["experiments"].values(), key=lambda p: (p["at"], p["batch"]))}
        for _, s in sorted(best.items())
    ]


def mixed(
    rows: Sequence[BatchRow], records: Mapping[str, Sequence[RunRecord]]
) -> list[tuple[Judged, list[dict[str, Any]]]]:
    """Each mixed result of the rows' reports (a sweep's own points left out) with its levels:
    [{"load": "c=1", "delta_pct", "verdict"}...]; its `delta_pct` the report's (the lowest
    level's)."""
    out = []
    for row in rows:
        runs = {r.approach: r for r in records.get(row.id, ())}
        points = sweep_points(row)
        for res in (row.report or {}).get("results") or []:
            name, delta = str(res.get("approach")), res.get("delta_pct")
            if res.get("verdict") != "mixed" or delta is None or name in points:
                continue
            record = runs.get(name) or runs.get("baseline")
            value = res.get("value")
            point = Judged(
                preset=row.preset, approach=name, batch=row.id, metric=row.plan.metric,
                hardware="unknown hardware" if record is None else hardware(record),
                verdict="mixed", delta_pct=float(delta),
                value=None if value is None else float(value), created_at=row.created_at)
            levels = [{"load": load_label(e.get("load") or {}, short=True),
                       "delta_pct": float(e["delta_pct"]), "verdict": e.get("verdict")}
                      for e in res.get("by_load") or [] if e.get("delta_pct") is not None]
            out.append((point, levels))
    return out
