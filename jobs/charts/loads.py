"""The charts of a batch with load levels (docs/contracts.md "Load levels and service-level
objectives"), drawn from its report alone: the metric against load, one line per configuration (the
baseline bold and black, each level that breaks the SLO marked with a red X), and throughput against
latency over every configuration and level, the Pareto front joined (no other point has more
throughput and less latency at once), the SLO's limit a vertical line when the latency is one.

`metric_figure` and `pareto_figure` build the matplotlib `Figure`s (tests read their lines,
markers and texts); `load_charts` renders both as PNGs with their file suffix and title, and is
empty for a batch without loads. Every text stays inside the figure: the legend sits in room
kept for it below the plot.
"""

from __future__ import annotations

import io
import math
import textwrap
from dataclasses import dataclass, replace
from typing import Any

from jobs.charts.axes import axis_label, pareto_front
from jobs.charts.chart_file import ChartFile
from jobs.charts.labels import PointLabel, place_labels
from jobs.charts.summary import chart_title
from jobs.core.plans import load_label, load_value
from jobs.core.units import unit_of

THROUGHPUTS = ("output_throughput", "total_throughput", "total_token_throughput",
               "request_throughput")
LATENCIES = ("median_ttft_ms", "median_itl_ms", "median_tpot_ms", "p99_ttft_ms",
             "p99_itl_ms", "median_e2e_latency_ms")
KNOB_UNITS = {"max-concurrency": "concurrent requests", "request-rate": "req/s"}
MAX_LINES = 10  # configurations drawn besides the baseline (a sweep's best, by their best level)
BASELINE = "black"
BREACH = "#d62728"  # red: the SLO's limit and every level breaking it
FRONT = "#e69f00"  # amber: the Pareto front
PALETTE = ("#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#393b79")  # tab10 without red (the breaches') and black
TITLE_WIDTH = 95  # characters of a 9-pt title that fit the 8-inch figure
LEGEND_COLUMNS = 2
LEGEND_ROW_IN = 0.19  # inches a 7-pt legend row takes (a wrapped line: 0.6 of it)


@dataclass(frozen=True)
class Series:
    name: str
    verdict: str  # "baseline" for the baseline
    levels: list[dict[str, Any]]  # report by_load entries
    colour: str

    @property
    def baseline(self) -> bool:
        return self.verdict == "baseline"


def load_charts(report: dict[str, Any]) -> list[ChartFile]:
    """Both charts of a batch with loads, as PNGs; [] without loads or without values."""
    if not report.get("loads"):
        return []
    metric, knob = str(report["metric"]), str(report["loads"]["knob"])
    charts = []
    figure = metric_figure(report)
    if figure is not None:
        charts.append(ChartFile("loads", _png(figure),
                                f"{metric} against {knob}: one line per configuration, the "
                                "baseline bold, SLO breaches marked"))
    figure = pareto_figure(report)
    if figure is not None:
        tput, latency = keys_of(report)
        charts.append(ChartFile("load-pareto", _png(figure),
                                f"{tput} against {latency} at every {knob} level: the Pareto "
                                "front"))
    return charts


def series_of(report: dict[str, Any]) -> tuple[list[Series], int]:
    """The baseline and the results with a value at some level (at most MAX_LINES, the best by
    their best level), each with its colour; and how many results with values were left out."""
    lower = bool(report.get("lower_is_better"))
    base = report["baseline"]
    results = [r for r in report.get("results", []) if _values(r.get("by_load"))]
    shown = sorted(results, key=lambda r: _best(r, lower))[:MAX_LINES]
    shown.sort(key=results.index)  # the report's order
    out = [Series(str(base["approach"]), "baseline", list(base.get("by_load") or []), BASELINE)]
    out += [Series(str(r["approach"]), str(r["verdict"]), list(r["by_load"]),
                   PALETTE[i % len(PALETTE)]) for i, r in enumerate(shown)]
    return out, len(results) - len(shown)


def metric_figure(report: dict[str, Any]) -> Any | None:
    """The metric against the load level, one line per configuration; None without values."""
    series, left_out = series_of(report)
    if not any(_values(s.levels) for s in series):
        return None
    metric, knob = str(report["metric"]), str(report["loads"]["knob"])
    levels = [float(v) for v in report["loads"]["levels"]]
    slo = {str(k): float(v) for k, v in (report.get("slo") or {}).items()}
    figure, axes = _figure()
    breaches: list[tuple[float, float]] = []
    for s in series:
        xs = [load_value(e["load"]) or math.nan for e in s.levels]
        ys = [_value(e, metric) for e in s.levels]
        axes.plot(xs, ys, marker="o", ms=7 if s.baseline else 5, color=s.colour,
                  lw=3.2 if s.baseline else 1.6, zorder=3 if s.baseline else 2,
                  label=_legend_label(s), gid=f"load:{s.name}")
        breaches += [(x, y) for x, y, e in zip(xs, ys, s.levels, strict=True)
                     if e.get("slo") == "violated" and not math.isnan(y)]
    if breaches:
        axes.scatter([x for x, _ in breaches], [y for _, y in breaches], marker="X", s=110,
                     color=BREACH, edgecolors="white", linewidths=0.8, zorder=4,
                     label=f"SLO violated ({_limits(slo)})", gid="breaches")
    if metric in slo:
        axes.axhline(slo[metric], color=BREACH, ls=":", lw=1.2, label=f"SLO limit: {metric}")
    _level_axis(axes, levels, knob)
    better = "lower is better" if report.get("lower_is_better") else "higher is better"
    axes.set_ylabel(axis_label(metric, better), fontsize=8)
    axes.grid(alpha=0.3)
    more = f"; {left_out} more configurations not drawn" if left_out else ""
    _title(axes, report, f"{metric} against {knob}, one line per configuration (the baseline "
                         f"bold){more}")
    return _finish(figure, axes)


def keys_of(report: dict[str, Any]) -> tuple[str, str]:
    """(throughput, latency) the Pareto chart plots: the metric when it is a throughput, the
    first SLO key the figures have (else the metric when it is a latency, else a median
    latency); ("", "") when the figures have neither."""
    metric = str(report["metric"])
    lower = bool(report.get("lower_is_better"))
    present = {k for s in series_of(report)[0] for e in s.levels for k in (e.get("figures") or {})}
    tputs = ([] if lower else [metric]) + list(THROUGHPUTS)
    lats = list(report.get("slo") or {}) + ([metric] if lower else []) + list(LATENCIES)
    tput = next((k for k in tputs if k in present), "")
    latency = next((k for k in lats if k in present and k != tput), "")
    return (tput, latency) if tput and latency else ("", "")


def pareto_figure(report: dict[str, Any]) -> Any | None:
    """Throughput against latency at every configuration's every level, the front joined; None
    without two points having both."""
    tput, latency = keys_of(report)
    if not tput:
        return None
    series, left_out = series_of(report)
    points: list[tuple[str, float, float]] = []  # (f"{series} {level}", throughput, latency)
    at: dict[str, tuple[float, float]] = {}
    figure, axes = _figure()
    breaches: list[tuple[float, float]] = []
    labels: list[tuple[str, PointLabel]] = []  # (its point's name, the label)
    for s in series:
        drawn = []
        for e in s.levels:
            figures = e.get("figures") or {}
            if tput not in figures or latency not in figures:
                continue
            y, x = float(figures[tput]), float(figures[latency])
            name = f"{s.name} @ {load_label(e['load'], short=True)}"
            points.append((name, y, x))
            at[name] = (x, y)
            drawn.append((x, y, load_label(e["load"], short=True)))
            if e.get("slo") == "violated":
                breaches.append((x, y))
        if not drawn:
            continue
        axes.plot([x for x, _, _ in drawn], [y for _, y, _ in drawn], marker="o",
                  ms=6 if s.baseline else 4.5, color=s.colour, lw=2.6 if s.baseline else 1.2,
                  zorder=3 if s.baseline else 2, label=_legend_label(s), gid=f"pareto:{s.name}")
        ends = (0, len(drawn) - 1)  # a line's first and last level are always named
        labels += [(f"{s.name} @ {text}", PointLabel(x, y, text, s.colour, keep=n in ends))
                   for n, (x, y, text) in enumerate(drawn)]
    if len(points) < 2:
        return None
    _latency_axis(axes, [x for _, _, x in points])
    front = sorted(pareto_front(points), key=lambda n: at[n][0])
    axes.plot([at[n][0] for n in front], [at[n][1] for n in front], ls="--", lw=2.0,
              color=FRONT, zorder=6, gid="front:line")
    axes.scatter([at[n][0] for n in front], [at[n][1] for n in front], s=170,
                 facecolors="none", edgecolors=FRONT, linewidths=2.0, zorder=5,
                 label=f"Pareto front ({len(front)} of {len(points)} points)", gid="front")
    slo = {str(k): float(v) for k, v in (report.get("slo") or {}).items()}
    if breaches:
        axes.scatter([x for x, _ in breaches], [y for _, y in breaches], marker="X", s=60,
                     color=BREACH, edgecolors="white", linewidths=0.6, zorder=4,
                     label=f"SLO violated ({_limits(slo)})", gid="breaches")
    if latency in slo:
        axes.axvline(slo[latency], color=BREACH, ls=":", lw=1.4, gid="slo:limit",
                     label=f"SLO limit: {latency} ≤ {slo[latency]:g} ms")
    axes.set_xlabel(axis_label(latency, "lower is better"), fontsize=8)
    axes.set_ylabel(axis_label(tput, "higher is better"), fontsize=8)
    axes.grid(alpha=0.3)
    axes.margins(x=0.1, y=0.1)
    more = f"; {left_out} more configurations not drawn" if left_out else ""
    _title(axes, report, f"{tput} against {latency}, every configuration at every "
                         f"{report['loads']['knob']} level, each line from the lowest up{more}")
    _finish(figure, axes)
    # The front's levels first, then each line's ends, then the rest where there is room.
    ranked = sorted(labels, key=lambda item: (item[0] not in front, not item[1].keep))
    place_labels(axes, [replace(label, keep=label.keep or name in front)
                        for name, label in ranked],
                 points=[(label.x, label.y) for _, label in labels])
    return figure


def _figure() -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure  # no pyplot: no global state, thread-safe

    figure = Figure(figsize=(8.0, 4.4), dpi=110)
    return figure, figure.add_subplot()


def _finish(figure: Any, axes: Any) -> Any:
    """The legend below the plot, the figure grown by the room it takes (its columns filled
    first, a wrapped label as tall as its lines), so that nothing reaches past an edge."""
    handles, labels = axes.get_legend_handles_labels()
    per_column = math.ceil(len(labels) / LEGEND_COLUMNS)
    lines = [label.count("\n") + 1 for label in labels]
    rows = sum(1 + 0.6 * (max(lines[r::per_column]) - 1) for r in range(per_column))
    figure.set_figheight(4.4 + LEGEND_ROW_IN * rows)
    room = (0.12 + LEGEND_ROW_IN * rows) / figure.get_figheight()
    figure.legend(handles, labels, loc="lower left", bbox_to_anchor=(0.01, 0.01), fontsize=7,
                  frameon=False, ncol=LEGEND_COLUMNS)
    figure.tight_layout(rect=(0, room, 1, 1))
    return figure


def _png(figure: Any) -> bytes:
    out = io.BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()


def _title(axes: Any, report: dict[str, Any], what: str) -> None:
    text = f"{chart_title(report)}\n{what}"
    lines = [line for part in text.split("\n") for line in textwrap.wrap(part, TITLE_WIDTH)]
    axes.set_title("\n".join(lines), fontsize=9, loc="left")


def _level_axis(axes: Any, levels: list[float], knob: str) -> None:
    """The levels as the ticks, on a log scale when they span 8x or more."""
    from matplotlib.ticker import NullLocator

    if levels and min(levels) > 0 and max(levels) / min(levels) >= 8:
        axes.set_xscale("log")
        axes.xaxis.set_minor_locator(NullLocator())
        axes.set_xlim(min(levels) / 1.4, max(levels) * 1.4)
    else:
        span = (max(levels) - min(levels)) or max(levels) or 1.0
        axes.set_xlim(min(levels) - span * 0.08, max(levels) + span * 0.08)
    axes.set_xticks(levels, [f"{v:g}" for v in levels])
    unit = KNOB_UNITS.get(knob)
    axes.set_xlabel(f"{knob} ({unit})" if unit else knob, fontsize=8)


def _latency_axis(axes: Any, latencies: list[float]) -> None:
    """A log scale when the latencies span 8x or more (the levels' usual spread), so that the
    low-latency end, where the light loads sit, is not crushed into one corner."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    if min(latencies) > 0 and max(latencies) / min(latencies) >= 8:
        axes.set_xscale("log")
        axes.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axes.xaxis.set_minor_formatter(NullFormatter())


def _legend_label(s: Series) -> str:
    label = (s.name if s.name == "baseline" else f"{s.name} (baseline)") if s.baseline else \
        f"{s.name} ({s.verdict})"
    return "\n".join(textwrap.wrap(label, 55)) or s.name


def _limits(slo: dict[str, float]) -> str:
    return ", ".join(f"{k} ≤ {v:g}{' ' + unit_of(k) if unit_of(k) else ''}"
                     for k, v in slo.items()) or "limits"


def _value(entry: dict[str, Any], metric: str) -> float:
    value = entry.get("value")
    if value is None:
        value = (entry.get("figures") or {}).get(metric)
    return math.nan if value is None or not math.isfinite(value) else float(value)


def _values(levels: Any) -> bool:
    return bool(levels) and any(e.get("value") is not None for e in levels)


def _best(result: dict[str, Any], lower: bool) -> float:
    """A sort key, best first: the result's best value over its levels."""
    values = [float(e["value"]) for e in result["by_load"] if e.get("value") is not None]
    return min(values) if lower else -max(values)
