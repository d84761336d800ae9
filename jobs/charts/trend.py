"""The digest's trend chart: one small panel per preset and hardware, each on its own metric's
scale, drawn with matplotlib (Agg, no pyplot) from `jobs.core.trends.daily_best`."""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Sequence
from typing import Any

MAX_PANELS = 6


def to_trend_png(series: Sequence[dict[str, Any]], *, start: dt.date, end: dt.date) -> bytes | None:
    """One panel per series (at most MAX_PANELS, the rest named in the last title); None
    without any point."""
    shown = [s for s in series if s["points"]][:MAX_PANELS]
    if not shown:
        return None
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.dates import AutoDateLocator, DateFormatter
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.5, 1.0 + 2.0 * len(shown)), dpi=110)
    axes_list = figure.subplots(len(shown), 1, sharex=True, squeeze=False)[:, 0]
    left = dt.datetime.combine(start, dt.time())
    right = dt.datetime.combine(end, dt.time()) + dt.timedelta(days=1)
    for axes, s in zip(axes_list, shown, strict=True):
        days = [dt.datetime.fromisoformat(p["day"]) + dt.timedelta(hours=12) for p in s["points"]]
        values = [p["value"] for p in s["points"]]
        axes.plot(days, values, marker="o", color="#1f5fa8", lw=1.5)
        for day, point in zip(days, s["points"], strict=True):
            axes.annotate(point["approach"], (day, point["value"]), fontsize=6,
                          textcoords="offset points", xytext=(0, 5), ha="center")
        better = "lower is better" if s["lower_is_better"] else "higher is better"
        axes.set_ylabel(f"{s['metric']}\n({better})", fontsize=7)
        axes.set_title(f"{s['preset']} on {s['hardware']}", fontsize=8)
        axes.grid(alpha=0.3)
        axes.set_xlim(left, right)
        axes.margins(y=0.25)
    hidden = len([s for s in series if s["points"]]) - len(shown)
    if hidden > 0:
        axes_list[-1].set_title(f"{axes_list[-1].get_title()} ({hidden} more not shown)",
                                fontsize=8)
    axes_list[-1].set_xlabel(f"day ({start.isoformat()} to {end.isoformat()}): "
                             "best configuration of the day")
    axes_list[-1].xaxis.set_major_locator(AutoDateLocator(maxticks=8))  # type: ignore[no-untyped-call]
    axes_list[-1].xaxis.set_major_formatter(DateFormatter("%m-%d"))  # type: ignore[no-untyped-call]
    figure.suptitle("specbench: best value per preset and hardware, day by day", fontsize=9)
    figure.tight_layout()
    out = io.BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()
