"""The digest's trend chart: one small panel per preset and hardware, drawn with matplotlib (Agg,
no pyplot) from `jobs.core.trends.daily_best`: each day's best judged result as its delta
against its own batch's baseline (%), coloured by verdict, on a zero-based axis with the zero
line drawn (above it: better than that batch's baseline)."""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Sequence
from typing import Any

from jobs.core.units import unit_of, with_unit

MAX_PANELS = 6
# The verdict colours of the batch summary's chart (jobs/charts/summary.py).
COLOURS = {"improved": "#2e8b3a", "unchanged": "#8c8c8c", "regressed": "#d62728"}
LINE = "#9aa9c0"


def to_trend_png(
    series: Sequence[dict[str, Any]], *, start: dt.date, end: dt.date, title: str | None = None
) -> bytes | None:
    """The chart as PNG bytes; None without any point."""
    figure = trend_figure(series, start=start, end=end, title=title)
    if figure is None:
        return None
    out = io.BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()


def trend_figure(
    series: Sequence[dict[str, Any]], *, start: dt.date, end: dt.date, title: str | None = None
) -> Any:
    """The matplotlib Figure (its own objects are what the tests read); None without any
    point. One panel per series, at most MAX_PANELS (the rest named in the last title)."""
    shown = [s for s in series if s["points"]][:MAX_PANELS]
    if not shown:
        return None
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.dates import AutoDateLocator, DateFormatter
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    height = 1.6 + 2.1 * len(shown)
    figure = Figure(figsize=(7.5, height), dpi=110)
    axes_list = figure.subplots(len(shown), 1, sharex=True, squeeze=False)[:, 0]
    left = dt.datetime.combine(start, dt.time())
    right = dt.datetime.combine(end, dt.time()) + dt.timedelta(days=1)
    for axes, s in zip(axes_list, shown, strict=True):
        _panel(axes, s, left=left, right=right)
    hidden = len([s for s in series if s["points"]]) - len(shown)
    if hidden > 0:
        axes_list[-1].set_title(f"{axes_list[-1].get_title()} ({hidden} more not shown)",
                                fontsize=8)
    axes_list[-1].set_xlabel(f"day ({start.isoformat()} to {end.isoformat()}): "
                             "the day's best judged result")
    axes_list[-1].xaxis.set_major_locator(AutoDateLocator(maxticks=8))  # type: ignore[no-untyped-call]
    axes_list[-1].xaxis.set_major_formatter(DateFormatter("%m-%d"))  # type: ignore[no-untyped-call]
    present = [v for v in COLOURS if any(p["verdict"] == v for s in shown for p in s["points"])]
    figure.legend(handles=[Line2D([], [], ls="", marker="o", color=COLOURS[v], label=v)
                           for v in present], loc="upper center", ncol=len(present) or 1,
                  bbox_to_anchor=(0.5, 1 - 0.3 / height), fontsize=7, frameon=False)
    figure.suptitle(title or "specbench digest: best judged Δ vs own baseline per preset and "
                    f"hardware, {start.isoformat()} to {end.isoformat()}", fontsize=9)
    figure.tight_layout(rect=(0, 0, 1, 1 - 0.5 / height))
    return figure


def _panel(axes: Any, s: dict[str, Any], *, left: dt.datetime, right: dt.datetime) -> None:
    days = [dt.datetime.fromisoformat(p["day"]) + dt.timedelta(hours=12) for p in s["points"]]
    deltas = [float(p["delta_pct"]) for p in s["points"]]
    axes.plot(days, deltas, color=LINE, lw=1.2, zorder=1)
    axes.scatter(days, deltas, c=[COLOURS.get(p["verdict"], LINE) for p in s["points"]],
                 s=30, zorder=3)
    for day, point in zip(days, s["points"], strict=True):
        value = "" if point["value"] is None else with_unit(f", {point['value']:.4g}",
                                                            s["metric"])
        name = point["approach"]
        if len(name) > 28:  # a sweep point's long name: broken after its commas
            name = name.replace(",", ",\n")
        # Near an edge the label grows inwards, so it stays inside the panel.
        where = (day - left) / (right - left)
        ha = "right" if where > 0.7 else "left" if where < 0.3 else "center"
        axes.annotate(f"{name} {point['delta_pct']:+.1f}%{value}",
                      (day, point["delta_pct"]), fontsize=6, textcoords="offset points",
                      xytext=(0, 6), ha=ha, va="bottom")
    axes.set_xlim(left, right)
    axes.axhline(0.0, color="black", lw=0.8, zorder=2)  # the batch's own baseline
    low, high = min(0.0, *deltas), max(0.0, *deltas)
    pad = max((high - low) * 0.25, 1.0)
    axes.set_ylim(low - (pad if low < 0 else 0.0), high + pad)  # zero-based: 0 always shown
    unit = f"; values in {unit_of(s['metric'])}" if unit_of(s["metric"]) else ""
    axes.set_ylabel(f"Δ {s['metric']},\n% vs own baseline{unit}", fontsize=7)
    axes.set_title(f"{s['preset']} on {s['hardware']}", fontsize=8)
    axes.grid(alpha=0.3)
