"""The digest's trend chart: one small panel per preset and hardware, drawn with matplotlib (Agg,
no pyplot) from `jobs.core.digest.experiment_best`: one point per experiment (a sweep and its
confirmation are one), its best judged result as its delta against its own batch's baseline
(%), coloured by verdict, on a zero-based axis with the zero line drawn (above it: better than
that batch's baseline). The x axis is the experiments in the order they started, shared by the
panels, so that a busy day is as many points as it had experiments, never one dot."""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Sequence
from typing import Any

from jobs.core.units import unit_of, with_unit

MAX_PANELS = 6
MAX_TICKS = 12  # experiments named on the x axis, at most (every Nth when there are more)
MAX_LABELS = 8  # a panel with more points labels only its best, worst and last
# The verdict colours of the batch summary's chart (jobs/charts/summary.py).
COLOURS = {"improved": "#2e8b3a", "mixed": "#b35806", "unchanged": "#8c8c8c",
           "regressed": "#d62728"}
CANCELLED = "#6a3d9a"  # purple, as a cancelled row of the summary's chart
LEGEND = {"mixed": "mixed (at its lowest load; bar: every level)"}
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
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    order = sorted({(p["at"], p["batch"]) for s in shown for p in s["points"]})
    where = {key: i for i, key in enumerate(order)}  # the experiments, shared by the panels
    height = 1.6 + 2.1 * len(shown)
    figure = Figure(figsize=(7.5, height), dpi=110)
    axes_list = figure.subplots(len(shown), 1, sharex=True, squeeze=False)[:, 0]
    for axes, s in zip(axes_list, shown, strict=True):
        _panel(axes, s, where=where, count=len(order))
    hidden = len([s for s in series if s["points"]]) - len(shown)
    if hidden > 0:
        axes_list[-1].set_title(f"{axes_list[-1].get_title()} ({hidden} more not shown)",
                                fontsize=8)
    axes_list[-1].set_xlabel(f"experiments in the order they started ({start.isoformat()} to "
                             f"{end.isoformat()}): each one's best judged result", fontsize=8)
    step = max(1, -(-len(order) // MAX_TICKS))
    ticks = list(range(0, len(order), step))
    axes_list[-1].set_xticks(ticks, [_when(order[i][0]) for i in ticks], fontsize=7)
    present = [v for v in COLOURS if any(p["verdict"] == v and not p.get("cancelled")
                                         for s in shown for p in s["points"])]
    handles = [Line2D([], [], ls="", marker="o", color=COLOURS[v], label=LEGEND.get(v, v))
               for v in present]
    if any(p.get("cancelled") for s in shown for p in s["points"]):
        handles.append(Line2D([], [], ls="", marker="s", mfc="none", mec=CANCELLED,
                              label="batch cancelled (off the line)"))
    columns = len(handles) if len(handles) <= 4 else 3  # five entries are wider than the chart
    rows = -(-len(handles) // max(columns, 1))
    figure.legend(handles=handles, loc="upper center", ncol=columns or 1,
                  bbox_to_anchor=(0.5, 1 - 0.45 / height), fontsize=7, frameon=False)
    figure.suptitle(title or f"specbench digest, {start.isoformat()} to {end.isoformat()}:\n"
                    "each experiment's best judged Δ vs own baseline, per preset and hardware",
                    fontsize=9)
    figure.tight_layout(rect=(0, 0, 1, 1 - (0.5 + 0.17 * (rows - 1)) / height))
    _untangle(figure)
    return figure


def _untangle(figure: Any) -> None:
    """A point's label that covers an earlier one moves to the other side of its point, when
    that side is free (a sweep point's long name can reach over its neighbour's)."""
    figure.draw_without_rendering()  # the labels' extents, as laid out
    for axes in figure.axes:
        placed: list[Any] = [axes.title.get_window_extent()]
        frame = axes.get_window_extent()
        for label in axes.texts:
            box = label.get_window_extent()
            if any(box.overlaps(other) for other in placed):
                _flip(label)
                moved = label.get_window_extent()
                if (any(moved.overlaps(other) for other in placed)
                        or moved.y1 > frame.y1 or moved.y0 < frame.y0):
                    _flip(label)  # no better there: back where it was
                else:
                    box = moved
            placed.append(box)


def _flip(label: Any) -> None:
    above = label.get_va() == "bottom"
    label.xyann = (label.xyann[0], -7 if above else 6)
    label.set_va("top" if above else "bottom")


def _when(at: str) -> str:
    """An experiment's start on the axis: '12-04\n09:00'."""
    stamp = dt.datetime.fromisoformat(at)
    return stamp.strftime("%m-%d\n%H:%M")


def _panel(axes: Any, s: dict[str, Any], *, where: dict[tuple[str, str], int], count: int) -> None:
    xs = [where[(p["at"], p["batch"])] for p in s["points"]]
    deltas = [float(p["delta_pct"]) for p in s["points"]]
    # A cancelled batch's best is of what ran before the cancel: off the line, hollow.
    whole = [(x, d, p) for x, d, p in zip(xs, deltas, s["points"], strict=True)
             if not p.get("cancelled")]
    cut = [(x, d) for x, d, p in zip(xs, deltas, s["points"], strict=True) if p.get("cancelled")]
    axes.plot([x for x, _, _ in whole], [d for _, d, _ in whole], color=LINE, lw=1.2, zorder=1,
              gid="trend")
    axes.scatter([x for x, _, _ in whole], [d for _, d, _ in whole],
                 c=[COLOURS.get(p["verdict"], LINE) for _, _, p in whole], s=30, zorder=3)
    if cut:
        axes.scatter([x for x, _ in cut], [d for _, d in cut], marker="s", s=34,
                     facecolors="none", edgecolors=CANCELLED, linewidths=1.4, zorder=3,
                     gid="cancelled")
    spans = [(x, p["levels"]) for x, p in zip(xs, s["points"], strict=True) if p.get("levels")]
    for x, levels in spans:  # a mixed result: from its worst level to its best
        ds = [float(level["delta_pct"]) for level in levels]
        axes.vlines(x, min(ds), max(ds), color=COLOURS["mixed"], lw=1.4, alpha=0.6, zorder=2,
                    gid=f"levels:{x}")
        deltas += ds
    axes.set_xlim(-0.6, count - 0.4)
    axes.axhline(0.0, color="black", lw=0.8, zorder=2)  # the batch's own baseline
    low, high = min(0.0, *deltas), max(0.0, *deltas)
    lines = max((_name(p["approach"]).count("\n") + 2 for p in s["points"]), default=2)
    pad = max((high - low) * 0.15 * lines, 1.0)  # room for the labels, two lines or more
    bottom, top = low - (pad if low < 0 else 0.0), high + pad
    axes.set_ylim(bottom, top)  # zero-based: 0 always shown
    labelled = _labelled(s["points"])
    for n, (x, point) in enumerate(zip(xs, s["points"], strict=True)):
        if id(point) not in labelled:
            continue
        name = _name(point["approach"])
        # Near an edge the label grows inwards, so it stays inside the panel; neighbours'
        # labels take turns above and below their points, so that they do not overlap.
        at = (x + 0.5) / max(count, 1)
        ha = "right" if at > 0.85 else "left" if at < 0.15 else "center"
        above = n % 2 == 0 or point["delta_pct"] - bottom < (top - bottom) * 0.3
        axes.annotate(f"{name}\n{_result(point, s['metric'])}",
                      (x, point["delta_pct"]), fontsize=6, textcoords="offset points",
                      xytext=(0, 6 if above else -7), ha=ha, va="bottom" if above else "top",
                      linespacing=1.1, zorder=4,  # over the line, legible
                      bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none",
                            "alpha": 0.8})
    unit = f"; values in {unit_of(s['metric'])}" if unit_of(s["metric"]) else ""
    axes.set_ylabel(f"Δ {s['metric']},\n% vs own baseline{unit}", fontsize=7)
    axes.set_title(f"{s['preset']} on {s['hardware']}", fontsize=8)
    axes.grid(alpha=0.3)


def _result(point: dict[str, Any], metric: str) -> str:
    """'+9.1%, 89.5 tok/s'; a mixed result's first and last levels ('mixed: c=1 +30.0%,
    130 tok/s … c=64 -30.0%'); a cancelled batch's said to be one."""
    value = "" if point["value"] is None else with_unit(f", {point['value']:.4g}", metric)
    shown = f"{point['delta_pct']:+.1f}%{value}"
    levels = point.get("levels") or []
    if len(levels) > 1:
        shown = (f"mixed: {levels[0]['load']} {shown} … "
                 f"{levels[-1]['load']} {levels[-1]['delta_pct']:+.1f}%")
    return shown + (" (batch cancelled)" if point.get("cancelled") else "")


def _name(approach: str) -> str:
    """A sweep point's long name broken after its commas."""
    return approach.replace(",", ",\n") if len(approach) > 28 else approach


def _labelled(points: Sequence[dict[str, Any]]) -> set[int]:
    """The points that get a label: all of a few; of many, the best, the worst and the last
    (the rest would write over one another)."""
    if len(points) <= MAX_LABELS:
        return {id(p) for p in points}
    best = max(points, key=lambda p: p["delta_pct"])
    worst = min(points, key=lambda p: p["delta_pct"])
    return {id(best), id(worst), id(points[-1])}
