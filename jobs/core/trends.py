"""The digest's trend as data: per preset and hardware, one point per experiment (a batch a person
started; a sweep and its confirmation are one), its best judged result as its delta against its
own batch's baseline (%), the same yardstick as the digest's best configuration
(`jobs.core.digest`): only improved, unchanged or regressed results count, never an absolute
median compared across batches, nor an inconclusive (confounded) or failed run, nor a sweep's
point on its own draws (its confirmed winner counts, with the confirmation's verdict).

`jobs.charts.trend` draws it; `jobs.commands.digest` reads the store once for both.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any
from zoneinfo import ZoneInfo

from jobs.core.batches import BatchRow
from jobs.core.digest_memory import judged
from jobs.core.experiments import experiment_id
from jobs.core.records import RunRecord
from jobs.core.units import unit_of


def experiment_best(
    rows: Sequence[BatchRow],
    records: Mapping[str, Sequence[RunRecord]],
    *,
    now: dt.datetime,
    days: float,
    tz: str = "UTC",
) -> list[dict[str, Any]]:
    """Per (preset, hardware) with a judged result in the window: one point per experiment, its
    largest `delta_pct` (the earlier result holds a tie), at the time the experiment started
    (`at`, in `tz`), oldest first. `batch` is the experiment's (the sweep's, for a confirmed
    winner); `judged_in` the batch whose report judged it."""
    since = now - dt.timedelta(days=days)
    zone = ZoneInfo(tz)
    started = {row.id: row.created_at for row in rows}
    window = sorted((row for row in rows if since <= row.created_at <= now),
                    key=lambda r: (r.created_at, r.id))
    plans = {row.id: row for row in window}
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for point in judged(window, records):
        experiment = experiment_id(plans[point.batch])
        at = started.get(experiment, point.created_at)
        series = best.setdefault((point.preset, point.hardware), {
            "preset": point.preset, "hardware": point.hardware, "metric": point.metric,
            "unit": unit_of(point.metric), "experiments": {}})
        held = series["experiments"].get(experiment)
        if held is None or point.delta_pct > held["delta_pct"]:
            series["experiments"][experiment] = {
                "at": at.astimezone(zone).isoformat(timespec="minutes"),
                "day": at.astimezone(zone).date().isoformat(),
                "delta_pct": point.delta_pct, "value": point.value, "verdict": point.verdict,
                "approach": point.approach, "batch": experiment, "judged_in": point.batch}
    return [
        {**{k: v for k, v in s.items() if k != "experiments"},
         "points": sorted(s["experiments"].values(), key=lambda p: (p["at"], p["batch"]))}
        for _, s in sorted(best.items())
    ]
