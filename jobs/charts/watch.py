"""A watch's series chart (`watch show ID --chart FILE.png`, docs/contracts.md "Regression
watch"), drawn with matplotlib (Agg, no pyplot): one panel per series (configuration, key, load
level), its points over time with each batch's range, the segments' means between confirmed
changes, each confirmed change marked with its confirmation beside it, the stack's changes as
labelled vertical lines, and blips (a candidate its confirmation did not confirm) hollow.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from jobs.core.units import unit_of
from jobs.core.watch import (
    ALERTED,
    BLIP,
    Change,
    SeriesKey,
    SeriesPoint,
    cuts_of,
    diff_text,
    stack_diff,
)

MAX_PANELS = 6
POINT = "#1f4e9a"
SEGMENT = "#2e8b3a"
CHANGE = "#d62728"
STACK = "#7f7f7f"
MAX_LABEL = 38  # characters of a stack change's label; the rest is cut with an ellipsis


def to_watch_png(
    series: Sequence[SeriesPoint], changes: Sequence[Change], *, title: str,
) -> bytes | None:
    """The chart as PNG bytes; None without any point."""
    figure = watch_figure(series, changes, title=title)
    if figure is None:
        return None
    out = io.BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()


def watch_figure(series: Sequence[SeriesPoint], changes: Sequence[Change], *, title: str) -> Any:
    """The Figure (the tests read its objects); None without any point."""
    by_key: dict[SeriesKey, list[SeriesPoint]] = {}
    for point in series:
        by_key.setdefault(point.key, []).append(point)
    if not by_key:
        return None
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    keys = sorted(by_key, key=lambda k: (k.approach != "baseline", k.approach, k.key, k.load))
    shown = keys[:MAX_PANELS]
    height = 1.6 + 2.6 * len(shown)
    figure = Figure(figsize=(9.0, height), dpi=110, layout="constrained")
    axes_list = figure.subplots(len(shown), 1, squeeze=False)[:, 0]
    cuts = cuts_of(changes)
    handles: dict[str, Any] = {}
    for axes, key in zip(axes_list, shown, strict=True):
        _panel(axes, by_key[key], changes=[c for c in changes if c.key == key],
               cuts=cuts.get(key, set()))
        for handle, label in zip(*axes.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    hidden = len(keys) - len(shown)
    figure.suptitle(title + (f" ({hidden} more series not shown)" if hidden else ""),
                    fontsize=10)
    # one key for every panel, below them: inside a panel it covered the lowest points
    figure.legend(list(handles.values()), list(handles), loc="outside lower center",
                  ncol=min(3, len(handles)), fontsize=7, frameon=False)
    return figure


def _panel(axes: Any, points: list[SeriesPoint], *, changes: list[Change],
           cuts: set[str]) -> None:
    index = {p.batch: i for i, p in enumerate(points)}
    xs = list(range(len(points)))
    blips = {c.batch for c in changes if c.state == BLIP}
    values = [p.value for p in points]
    lows = [max(0.0, p.value - p.low) for p in points]
    highs = [max(0.0, p.high - p.value) for p in points]
    axes.errorbar(xs, values, yerr=[lows, highs], fmt="none", ecolor=POINT, alpha=0.45,
                  elinewidth=1, zorder=2)
    solid = [i for i, p in enumerate(points) if p.batch not in blips]
    hollow = [i for i, p in enumerate(points) if p.batch in blips]
    axes.plot(solid, [values[i] for i in solid], "o", color=POINT, ms=4, zorder=3,
              label="a batch's median (bar: its range)")
    if hollow:
        axes.plot(hollow, [values[i] for i in hollow], "o", mfc="white", mec=CHANGE, ms=7,
                  mew=1.5, zorder=4, label="a blip: not confirmed (hollow)")
    _segments(axes, points, cuts=cuts)
    again = _changes(axes, points, changes=changes, index=index)
    _stack_lines(axes, points)
    key = points[0].key
    where = f" at {key.load}" if key.load else ""
    axes.set_title(f"{key.key} of {key.approach}{where}", fontsize=9, loc="left")
    axes.set_ylabel(unit_of(key.key) or key.key, fontsize=8)
    step = max(1, -(-len(points) // 10))
    ticks = list(range(0, len(points), step))
    same_time = len({(p.at.hour, p.at.minute) for p in points}) == 1
    shape = "%Y-%m-%d" if same_time else "%m-%d %H:%M"  # nightly: the date says it all
    axes.set_xticks(ticks, [points[i].at.strftime(shape) for i in ticks], fontsize=7)
    axes.tick_params(axis="y", labelsize=7)
    axes.set_xlim(-0.8, len(points) - 0.2)
    low = min(min(p.low for p in points), min(values), *again)
    high = max(max(p.high for p in points), max(values), *again)
    pad = (high - low) * 0.15 or abs(high) * 0.05 or 1.0
    axes.set_ylim(low - pad, high + pad * 2.2)  # room at the top for the stack labels


def _segments(axes: Any, points: list[SeriesPoint], *, cuts: set[str]) -> None:
    """Each segment's mean, from its first point to its last."""
    starts = [0] + [i for i, p in enumerate(points) if p.batch in cuts and i > 0]
    for n, (begin, end) in enumerate(zip(starts, [*starts[1:], len(points)], strict=True)):
        chunk = [p.value for p in points[begin:end]]
        if not chunk:
            continue
        mean = sum(chunk) / len(chunk)
        axes.plot([begin - 0.4, end - 0.6], [mean, mean], "-", color=SEGMENT, lw=1.6, zorder=1,
                  label="segment mean (between confirmed changes)" if n == 0 else None)


def _changes(axes: Any, points: list[SeriesPoint], *, changes: list[Change],
             index: dict[str, int]) -> list[float]:
    """A confirmed change: an arrow from the old level to its first bad night (the point stays
    visible), its id and % beside it; every candidate's confirmation a diamond beside its
    night (filled: confirmed, hollow: it did not confirm). The confirmations' values."""
    drawn: list[float] = []
    labelled: set[str] = set()
    for change in changes:
        again = change.data.get("confirmation_value")
        night = index.get(change.batch)
        if isinstance(again, int | float) and night is not None:
            confirmed = change.state in ALERTED
            label = "its confirmation (hollow: not confirmed)"
            axes.plot([night + 0.3], [again], "D", ms=4, zorder=5, mec=CHANGE,
                      mfc=CHANGE if confirmed else "white",
                      label=None if label in labelled else label)
            labelled.add(label)
            drawn.append(float(again))
        if change.state not in ALERTED or change.since not in index:
            continue
        at = index[change.since]
        value = points[at].value
        old = (change.data.get("before") or {}).get("value", value)
        label = "confirmed change"
        axes.annotate("", (at, value), xytext=(at, old), zorder=5, arrowprops={
            "arrowstyle": "-|>", "color": CHANGE, "lw": 1.5, "shrinkA": 0, "shrinkB": 4})
        axes.plot([], [], marker="$\\downarrow$", ls="", color=CHANGE, ms=9,
                  label=None if label in labelled else label)
        labelled.add(label)
        axes.annotate(f"change {change.id}: {change.delta_pct:+.1f}%", (at, (old + value) / 2),
                      xytext=(6, 0), textcoords="offset points", fontsize=7, color=CHANGE,
                      ha="left", va="center")  # right of the arrow: clear of the stack line
    return drawn


def _stack_lines(axes: Any, points: list[SeriesPoint]) -> None:
    """A dashed line between two nights whose stacks differ, named by what changed."""
    first = True
    for i in range(1, len(points)):
        diff = stack_diff(points[i - 1].stack, points[i].stack)
        if not diff:
            continue
        label = diff_text(diff)
        if len(label) > MAX_LABEL:
            label = label[:MAX_LABEL - 1] + "…"
        axes.axvline(i - 0.5, color=STACK, ls="--", lw=1, zorder=0,
                     label="the stack changed" if first else None)
        axes.annotate(label, (i - 0.5, 1.0), xycoords=("data", "axes fraction"),
                      xytext=(3, -3), textcoords="offset points", fontsize=7, color="#404040",
                      rotation=0, ha="left", va="top")
        first = False
