"""A sweep's charts (PNG): the landscape of the metric over the swept knobs, and the throughput
against latency Pareto front of every configuration measured.

The landscape is a line for one knob and a heat map for two; a point that got no server is left
blank (never drawn as a value). With more than two knobs it shows the first two, each cell the
best value measured over the other knobs. The best measured point is ringed (only the
confirmation says whether it is a win), the baseline-equal point marked. A heat map's numbers
are white on a dark cell and black on a light one (whichever contrasts more); every text stays
inside the figure (titles wrapped, the Pareto front's long names in a numbered key below it).
"""

from __future__ import annotations

import io
import math
import statistics
import textwrap
from collections.abc import Mapping
from typing import Any

from jobs.charts.axes import axis_label, latency_metric, pareto_front
from jobs.charts.labels import PointLabel, place_labels
from jobs.core.records import RunRecord
from jobs.core.sweeps import SweepPlan, show_value
from jobs.core.units import unit_of

TITLE_WIDTH = 80  # characters of a 9-pt title that fit the 7-inch figure
KEY_WIDTH = 110  # characters of a 6-pt key line
KEY_LINE_IN = 0.1  # inches a 6-pt line takes
MAX_KEYED = 12  # front points numbered, at most (evenly spread, both ends kept)
NOT_RUN = "#666666"  # the "·" of a cell not run: 5.7:1 on white


def _figure(width: float, height: float) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure  # no pyplot: no global state, thread-safe

    return Figure(figsize=(width, height), dpi=110)


def _png(figure: Any) -> bytes:
    if figure.get_layout_engine() is None:  # a figure may bring its own
        figure.tight_layout()
    out = io.BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()


def landscape_png(
    sweep: SweepPlan,
    values: Mapping[str, float | None],
    *,
    metric: str,
    lower_is_better: bool,
    winner: str | None = None,
    baseline: float | None = None,
) -> bytes | None:
    """The metric over the grid; `values`: point -> its value (the baseline-equal point may be
    given the baseline's); `baseline`: the baseline's value, named in the title (a line across
    a one-knob chart) so that a reader knows which points beat it. None when no point has a
    value."""
    if not any(v is not None and math.isfinite(v) for v in values.values()):
        return None
    knobs = list(sweep.grid)
    better = "lower is better" if lower_is_better else "higher is better"
    if len(knobs) == 1:
        return _line(sweep, values, metric=metric, better=better, winner=winner,
                     baseline=baseline)
    return _heat(sweep, values, metric=metric, better=better, winner=winner,
                 lower_is_better=lower_is_better, baseline=baseline)


def _line(
    sweep: SweepPlan, values: Mapping[str, float | None], *, metric: str, better: str,
    winner: str | None, baseline: float | None,
) -> bytes:
    [knob] = list(sweep.grid)
    labels = [show_value(v) for v in sweep.grid[knob]]
    ys = [_value(values, p.approach) for p in sweep.points]
    figure = _figure(7.0, 3.6)
    axes = figure.add_subplot()
    axes.plot(range(len(ys)), ys, "o-", color="#1f5fa8")  # NaN: a gap, not a value
    for x, point in enumerate(sweep.points):
        if math.isnan(ys[x]):
            # half-way up, in the line's gap: clear of a baseline line near the axis
            axes.annotate("not run", (x, 0.5), xycoords=("data", "axes fraction"),
                          ha="center", va="center", fontsize=7, color=NOT_RUN)
        if point.approach == winner:
            axes.scatter([x], [ys[x]], s=180, facecolors="none", edgecolors="#c23b22", lw=2,
                         label="best measured" if winner else None)
        if point.approach == sweep.same_as_baseline:
            axes.scatter([x], [ys[x]], marker="s", color="#555555", label="baseline")
    if baseline is not None:
        axes.axhline(baseline, color="#555555", ls="--", lw=1,
                     label=f"baseline {_shown(baseline, metric)}")
    axes.set_xticks(range(len(labels)), labels)
    axes.set_xlim(-0.5, len(labels) - 0.5)  # a value not run at either end: its note inside
    axes.set_xlabel(knob)
    axes.set_ylabel(axis_label(metric, better))
    axes.grid(alpha=0.3)
    axes.set_title(_wrap(f"sweep {sweep.name}: {_measured(sweep, values)}")
                   + _against(baseline, metric), fontsize=9)
    if winner or sweep.same_as_baseline or baseline is not None:
        axes.legend(fontsize=7, frameon=False)
    return _png(figure)


def _heat(
    sweep: SweepPlan, values: Mapping[str, float | None], *, metric: str, better: str,
    winner: str | None, lower_is_better: bool, baseline: float | None,
) -> bytes:
    import numpy as np

    knobs = list(sweep.grid)
    rows, cols = knobs[0], knobs[1]
    grid = np.array(heat_cells(sweep, values, lower_is_better=lower_is_better))
    where = {p.approach: (p.index[0], p.index[1]) for p in sweep.points}
    figure = _figure(7.0, max(3.0, 1.6 + 0.45 * len(sweep.grid[rows])))  # the scale's label
    axes = figure.add_subplot()
    masked = np.ma.masked_invalid(grid)
    cmap = _colormap(lower_is_better)
    image = axes.imshow(masked, cmap=cmap, aspect="auto")
    scale = figure.colorbar(image, ax=axes)
    scale.set_label(axis_label(metric, better), fontsize=8)
    for (i, j), value in np.ndenumerate(grid):
        if math.isnan(value):
            axes.text(j, i, "·", ha="center", va="center", fontsize=7, color=NOT_RUN)
            continue
        axes.text(j, i, f"{value:.4g}", ha="center", va="center", fontsize=7,
                  color=text_colour(image.cmap(image.norm(value))), gid=f"cell:{i},{j}")
    for name, marker in ((winner, "best measured"), (sweep.same_as_baseline, "baseline")):
        if name and name in where:
            i, j = where[name]
            color = "#c23b22" if marker == "best measured" else "#555555"
            axes.add_patch(_box(j, i, color))
            axes.plot([], [], "s", mfc="none", mec=color, label=marker)
    axes.set_xticks(range(len(sweep.grid[cols])), [show_value(v) for v in sweep.grid[cols]])
    axes.set_yticks(range(len(sweep.grid[rows])), [show_value(v) for v in sweep.grid[rows]])
    axes.set_xlabel(cols)
    axes.set_ylabel(rows)
    extra = f"; best over {', '.join(knobs[2:])}" if len(knobs) > 2 else ""
    axes.set_title(_wrap(f"sweep {sweep.name}: {_measured(sweep, values)}; blank: not run"
                         f"{extra}") + _against(baseline, metric), fontsize=9)
    if winner or sweep.same_as_baseline:
        axes.legend(loc="upper left", bbox_to_anchor=(0.0, _below(axes)), fontsize=7,
                    frameon=False, ncol=2)  # under the x label: the title above keeps its place
    return _png(figure)


def heat_cells(
    sweep: SweepPlan, values: Mapping[str, float | None], *, lower_is_better: bool
) -> list[list[float]]:
    """The heat map's cells over the first two knobs: NaN where no point was run, else the best
    value measured over the other knobs."""
    first, second = (list(sweep.grid.values()) + [[None]])[:2]
    cells = [[float("nan")] * len(second) for _ in first]
    pick = min if lower_is_better else max
    for point in sweep.points:
        i, j = point.index[0], point.index[1] if len(point.index) > 1 else 0
        value = _value(values, point.approach)
        if not math.isnan(value):
            cells[i][j] = value if math.isnan(cells[i][j]) else pick(cells[i][j], value)
    return cells


def text_colour(cell: Any) -> str:
    """Black or white, whichever contrasts more with the cell's colour (WCAG's ratio)."""
    light = relative_luminance(cell)
    on_black, on_white = (light + 0.05) / 0.05, 1.05 / (light + 0.05)
    return "black" if on_black >= on_white else "white"


def relative_luminance(colour: Any) -> float:
    """WCAG 2's relative luminance of a matplotlib colour: 0 black, 1 white."""
    from matplotlib.colors import to_rgb

    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in to_rgb(colour))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _spread(names: list[str], most: int) -> list[str]:
    """At most `most` of `names`, evenly spread, the first and the last kept."""
    if len(names) <= most:
        return names
    step = (len(names) - 1) / (most - 1)
    return [names[round(i * step)] for i in range(most)]


def _key_line(text: str, width: int = KEY_WIDTH) -> str:
    """A sweep point's name broken after its commas, so that no line is wider than `width`."""
    lines = [""]
    for part in text.split(","):
        piece = part if not lines[-1] else "," + part
        if lines[-1] and len(lines[-1]) + len(piece) > width:
            lines[-1] += ","
            lines.append("      " + part)
        else:
            lines[-1] += piece
    return "\n".join(lines)


def _wrap(text: str, width: int = TITLE_WIDTH) -> str:
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False))


def _below(axes: Any, inches: float = 0.5) -> float:
    """The axes fraction `inches` below the plot, whatever the figure's height."""
    return -inches / float(axes.figure.get_figheight() * axes.get_position().height)


def _colormap(lower_is_better: bool) -> Any:
    import matplotlib

    return matplotlib.colormaps["viridis_r" if lower_is_better else "viridis"].with_extremes(
        bad="white")


def _box(x: int, y: int, color: str) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, edgecolor=color, lw=2.5)


def _value(values: Mapping[str, float | None], name: str) -> float:
    value = values.get(name)
    return float("nan") if value is None or not math.isfinite(value) else float(value)


def _against(baseline: float | None, metric: str) -> str:
    """A title's last line: 'baseline 652 tok/s' ('' without a baseline value)."""
    return "" if baseline is None else f"\nbaseline {_shown(baseline, metric)}"


def _shown(value: float, metric: str) -> str:
    unit = unit_of(metric)
    return f"{value:.4g}{' ' + unit if unit else ''}"


def _measured(sweep: SweepPlan, values: Mapping[str, float | None]) -> str:
    run = len([p for p in sweep.points if p.approach in values])
    return f"{run} of {len(sweep.points)} points measured ({sweep.search})"


def pareto_png(records: list[RunRecord], *, metric: str) -> bytes | None:
    """Throughput (`metric`) against median latency for every configuration with both; the
    front (no configuration faster and quicker at once) drawn as a line. None without data."""
    latency = latency_metric(records)
    if latency is None:
        return None
    points = []
    for record in records:
        tput, lat = record.samples(metric), record.samples(latency)
        if tput and lat:
            points.append((record.approach, statistics.median(tput), statistics.median(lat)))
    if len(points) < 2:
        return None
    front = pareto_front(points)
    keyed = _spread(front, MAX_KEYED)
    key = ["Pareto front, by throughput:"]
    key += [_key_line(f"{front.index(name) + 1}  {name}") for name in keyed]
    if len(keyed) < len(front):
        key.append(f"({len(front) - len(keyed)} more on the front, unnumbered: the run records "
                   "have them)")
    lines = sum(k.count("\n") + 1 for k in key)
    figure = _figure(7.0, 4.2 + KEY_LINE_IN * lines)
    axes = figure.add_subplot()
    by_name = {name: (tput, lat) for name, tput, lat in points}
    axes.scatter([lat for _, _, lat in points], [tput for _, tput, _ in points], s=14,
                 color="#9aa9c0", label="measured")
    axes.plot([by_name[n][1] for n in front], [by_name[n][0] for n in front], "o-",
              color="#1f5fa8", label="Pareto front")
    axes.set_xlabel(axis_label(latency, "lower is better"))
    axes.set_ylabel(axis_label(metric, "higher is better"))
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, frameon=False, loc="lower right")
    axes.margins(x=0.08, y=0.08)  # the numbers of the front's ends inside the plot
    figure.text(0.01, 0.01, "\n".join(key), fontsize=6, va="bottom", ha="left",
                linespacing=1.2, gid="front:key")
    room = (0.15 + KEY_LINE_IN * lines) / figure.get_figheight()
    figure.set_layout_engine("tight", rect=(0, room, 1, 1))  # the key's room below the plot
    # A number beside each point of the front, its name in the key below (a sweep point's name
    # is longer than the plot is wide), where it covers no other number and no point.
    place_labels(axes, [PointLabel(by_name[name][1], by_name[name][0],
                                   str(front.index(name) + 1), "black") for name in keyed],
                 points=[(lat, tput) for _, tput, lat in points], fontsize=6)
    figure.set_layout_engine("none")  # the layout the numbers were placed in, kept
    return _png(figure)
