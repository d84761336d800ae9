"""The digest's trend as data: the best measured value per preset and hardware, day by day.

`jobs.charts.trend` draws it; `jobs.commands.digest` reads the store once for both.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from jobs.core.digest_memory import hardware, measured
from jobs.core.records import RunRecord
from jobs.core.verdicts import is_better

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
    """Per (preset, hardware) with a measured value in the window: each day's best value
    (days in `tz`), oldest first."""
    since = now - dt.timedelta(days=days)
    zone = ZoneInfo(tz)
    best: dict[tuple[str, str], dict[str, Any]] = {}
    window = [row for row in rows if since <= row.created_at <= now]
    for row, record, metric, lower, value in measured(window, records):
        day = row.created_at.astimezone(zone).date().isoformat()
        series = best.setdefault((row.preset, hardware(record)), {
            "preset": row.preset, "hardware": hardware(record), "metric": metric,
            "lower_is_better": lower, "days": {}})
        held = series["days"].get(day)
        if held is None or is_better(value, held["value"], lower_is_better=lower):
            series["days"][day] = {"day": day, "value": value, "approach": record.approach,
                                   "batch": row.id}
    return [
        {**{k: v for k, v in s.items() if k != "days"},
         "points": [s["days"][d] for d in sorted(s["days"])]}
        for _, s in sorted(best.items())
    ]
