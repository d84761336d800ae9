"""The digest's trend as data: per preset and hardware, each day's best judged result as its
delta against its own batch's baseline (%), the same yardstick as the digest's best
configuration (`jobs.core.digest`): only improved, unchanged or regressed results count, never
an absolute median compared across batches, nor an inconclusive (confounded) or failed run.

`jobs.charts.trend` draws it; `jobs.commands.digest` reads the store once for both.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from jobs.core.digest_memory import judged
from jobs.core.records import RunRecord
from jobs.core.units import unit_of

if TYPE_CHECKING:
    from jobs.store import BatchRow


def daily_best(
    rows: Sequence[BatchRow],
    records: Mapping[str, Sequence[RunRecord]],
    *,
    now: dt.datetime,
    days: float,
    tz: str = "UTC",
) -> list[dict[str, Any]]:
    """Per (preset, hardware) with a judged result in the window: each day's largest
    `delta_pct` (days in `tz`; the earlier result holds a tie), oldest first."""
    since = now - dt.timedelta(days=days)
    zone = ZoneInfo(tz)
    best: dict[tuple[str, str], dict[str, Any]] = {}
    window = sorted((row for row in rows if since <= row.created_at <= now),
                    key=lambda r: (r.created_at, r.id))
    for point in judged(window, records):
        day = point.created_at.astimezone(zone).date().isoformat()
        series = best.setdefault((point.preset, point.hardware), {
            "preset": point.preset, "hardware": point.hardware, "metric": point.metric,
            "unit": unit_of(point.metric), "days": {}})
        held = series["days"].get(day)
        if held is None or point.delta_pct > held["delta_pct"]:
            series["days"][day] = {"day": day, "delta_pct": point.delta_pct,
                                   "value": point.value, "verdict": point.verdict,
                                   "approach": point.approach, "batch": point.batch}
    return [
        {**{k: v for k, v in s.items() if k != "days"},
         "points": [s["days"][d] for d in sorted(s["days"])]}
        for _, s in sorted(best.items())
    ]
