"""`digest [--days 7]`: the status digest over stored batches, and its trend chart.

The one digest path: the CLI, the console, Slack and the weekly beat all come here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from jobs import settings
from jobs.batches import runners
from jobs.commands.context import Context
from jobs.core.digest import build_digest, experiment_best, watch_section
from jobs.core.limits import MAX_DAYS
from jobs.core.rules import load_rules
from jobs.errors import UserError


@dataclass(frozen=True)
class Digest:
    digest: dict[str, Any]
    chart: bytes | None  # the trend PNG; None without data or when not asked for


CHART_NAME = "specbench-digest-trend.png"
CHART_TITLE = "Each experiment's best judged Δ vs own baseline per preset and hardware"


def digest(
    ctx: Context, *, days: float = 7.0, chart: bool = True, now: dt.datetime | None = None
) -> Digest:
    if not 0 < days <= MAX_DAYS:  # NaN too; a date MAX_DAYS back is always representable
        raise UserError(f"--days must be more than 0 and at most {MAX_DAYS}, got {days:g}")
    runners.settle(ctx.store)  # a batch whose runner died is counted ended, not running
    now = now or dt.datetime.now(dt.UTC)
    tz = settings.timezone()
    # The window's batches and only the earlier rows the sections need (indexed queries).
    rows, records, memory = ctx.store.digest_inputs(
        since=now - dt.timedelta(days=days), now=now)
    data = build_digest(rows, records, now=now, days=days, tz=tz, memory=memory,
                        rules=load_rules())
    watches = {w.id: w for w in ctx.store.list_watches()}
    data["watches"] = watch_section(
        ctx.store.changes_between(now - dt.timedelta(days=days), now), watches=watches,
        history={w: ctx.store.watch_changes(w) for w, row in watches.items()
                 if row.state != "stopped"})
    png = None
    if chart:
        from jobs.charts.trend import to_trend_png

        zone = ZoneInfo(tz)
        start = (now - dt.timedelta(days=days)).astimezone(zone).date()
        png = to_trend_png(experiment_best(rows, records, now=now, days=days, tz=tz),
                           start=start, end=now.astimezone(zone).date())
    return Digest(digest=data, chart=png)
