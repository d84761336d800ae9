"""The summary's chart: the baseline and each approach on the batch's metric, coloured by its
verdict, with its % delta, its failure cause or why it has no value (PNG).

`summary_figure` builds the matplotlib `Figure` (tests read its title, labels, colours and
texts); `to_chart_png` renders it. The value axis starts at 0: a throughput or a latency is a
magnitude, and a cut axis turns a 2% difference into a bar twice as long; the % delta written
beside each row gives the precision a zero-based axis cannot.
"""

from __future__ import annotations

import io
import statistics
import textwrap
from typing import Any

from jobs.core.messages import environment
from jobs.core.plans import load_label
from jobs.core.records import RunRecord
from jobs.core.units import unit_of

COLOURS = {
    "baseline": "#1f3b70",      # navy: the reference, no verdict
    "improved": "#2e8b3a",      # green
    "regressed": "#d62728",     # red
    "mixed": "#b35806",         # dark orange: improved at some load levels, regressed at others
    "unchanged": "#8c8c8c",     # grey
    "inconclusive": "#e69f00",  # amber
    "failed": "#7a0010",        # dark red
    "cancelled": "#6a3d9a",     # purple: stopped by a cancel
    "skipped": "#5e9fc4",       # light blue: never started
}
MARKS = {"improved": "▲", "regressed": "▼", "mixed": "±", "unchanged": "=", "inconclusive": "?",
         "failed": "✗", "cancelled": "■", "skipped": "·"}
NOTE_BOX = {"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 0.6}  # over lines


def to_chart_png(report: dict[str, Any], records: list[RunRecord]) -> bytes | None:
    """The chart as PNG; None when nothing was measured."""
    figure = summary_figure(report, records)
    if figure is None:
        return None
    out = io.BytesIO()
    figure.savefig(out, format="png", bbox_inches="tight")  # the legend above included
    return out.getvalue()


def summary_figure(report: dict[str, Any], records: list[RunRecord]) -> Any | None:
    """A horizontal dot plot, the baseline on top: each row's median and min–max in its
    verdict's colour, a note beside it; None when no configuration has a sample."""
    metric = str(report["metric"])
    rows = chart_rows(report, records)
    if not any(row["samples"] for row in rows):
        return None
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure  # no pyplot: no global state, thread-safe

    figure = Figure(figsize=(8.5, 1.9 + 0.36 * len(rows)), dpi=110)
    axes = figure.add_subplot()
    top = max(max(row["samples"]) for row in rows if row["samples"])
    axes.set_xlim(0, top * 1.3)  # room on the right for the notes
    _draw_baseline(axes, rows[0]["samples"])
    for y, row in enumerate(reversed(rows)):
        _draw_row(axes, y, row, metric=metric, span=top * 1.3)
    axes.set_yticks(range(len(rows)), [_label(row["name"]) for row in reversed(rows)],
                    fontsize=8)
    axes.set_ylim(-0.7, len(rows) - 0.3)
    unit = unit_of(metric)
    better = "lower is better" if report.get("lower_is_better") else "higher is better"
    axes.set_xlabel(f"{metric}{_at_lowest(report)} ({unit + ', ' if unit else ''}{better}); "
                    "dot: median, bar: min–max of the repetitions", fontsize=8)
    axes.set_title("\n".join(textwrap.wrap(chart_title(report), 90)), fontsize=9, loc="left")
    axes.grid(axis="x", alpha=0.3)
    _legend(axes, rows)
    figure.tight_layout()
    fit_notes(figure, axes)
    return figure


def fit_notes(figure: Any, axes: Any) -> None:
    """The value axis widened until every note beside a dot ends inside the plot: a long note
    (a failure's cause, a mixed row's levels) never runs over the frame."""
    for _ in range(3):  # the layout moves the frame a little each time
        figure.draw_without_rendering()
        frame = axes.get_window_extent()
        right = axes.get_xlim()[1]
        needed = right
        for note in axes.texts:
            if not hasattr(note, "xyann"):  # a row without a value: its note at the axis' start
                continue
            value = note.xy[0]
            reach = note.get_window_extent().x1 - axes.transData.transform((value, 0))[0]
            room = frame.width - reach - 4  # pixels: clear of the frame's line
            if room > 0 and value / right * frame.width > room:
                needed = max(needed, value * frame.width / room)
        if needed <= right:
            return
        axes.set_xlim(0, needed)
        figure.tight_layout()


def _at_lowest(report: dict[str, Any]) -> str:
    """' at max-concurrency 1' for a batch with load levels: the rows are its lowest level's
    (the load charts have every level); '' without."""
    loads = report.get("loads") or {}
    if not loads.get("levels"):
        return ""
    return f" at {load_label({loads['knob']: loads['levels'][0]})}"


def chart_title(report: dict[str, Any]) -> str:
    """'eagle3 · batch b-7f3a · 8x NVIDIA … (cc 12.0), PCIe' (the summary's own host line)."""
    host = environment().get_template("_macros.j2").module.host(  # type: ignore[attr-defined]
        report.get("fingerprint") or {})
    return f"{report.get('preset', '?')} · batch {report.get('batch', '?')} · {host}"


def chart_rows(report: dict[str, Any], records: list[RunRecord]) -> list[dict[str, Any]]:
    """The baseline, then each result in the report's order: name, verdict, samples, note."""
    metric = str(report["metric"])
    samples = {r.approach: r.samples(metric) for r in records}
    base = report["baseline"]
    base_samples = samples.get(base["approach"]) or list(base.get("samples") or [])
    rows = [{"name": base["approach"], "verdict": "baseline", "samples": base_samples,
             "note": _baseline_note(base, base_samples, metric)}]
    for result in report["results"]:
        rows.append({
            "name": result["approach"], "verdict": result["verdict"],
            "samples": samples.get(result["approach"]) or list(result.get("samples") or []),
            "note": _note(result),
        })
    return rows


def _baseline_note(base: dict[str, Any], samples: list[float], metric: str) -> str:
    if not samples:
        return "✗ baseline failed: nothing to compare"
    unit = unit_of(metric)
    return f"{_num(statistics.median(samples))}{' ' + unit if unit else ''}"


def _note(result: dict[str, Any]) -> str:
    verdict = result["verdict"]
    if verdict == "failed":
        return f"✗ failed: {result.get('cause') or 'no measurement'}"
    if verdict == "cancelled":
        return "■ cancelled"
    if verdict == "skipped":
        return "· skipped (never started)"
    if verdict == "mixed":  # by load level: each level's % (the summary has the sentence)
        return f"± mixed: {mixed_levels(result)}"
    delta = result.get("delta_pct")
    shown = "–" if delta is None else f"{delta:+.1f}%"
    return f"{MARKS[verdict]} {shown}" + (" inconclusive" if verdict == "inconclusive" else "")


def mixed_levels(result: dict[str, Any], most: int = 4) -> str:
    """A mixed result's levels as 'c=1 +30.0%, c=4 +12.0%, c=16 -10.0%' (a workload's
    categories: 'code +8.1%, summarization -9.3%'): with more than `most`, the first, the two
    either side of the first change of verdict and the last, '…' between."""
    levels = [(load_label(e["load"], short=True), float(e["delta_pct"]), e.get("verdict"))
              for e in result.get("by_load") or [] if e.get("delta_pct") is not None] or [
        (str(e["category"]), float(e["delta_pct"]), e.get("verdict"))
        for e in result.get("by_category") or [] if e.get("delta_pct") is not None]
    if not levels:
        delta = result.get("delta_pct")
        return "–" if delta is None else f"{delta:+.1f}% at the lowest load"
    keep = set(range(len(levels)))
    if len(levels) > most:
        turn = next((i for i in range(1, len(levels)) if levels[i][2] != levels[i - 1][2]), 1)
        keep = {0, turn - 1, turn, len(levels) - 1}
    shown: list[str] = []
    for i, (label, delta, _) in enumerate(levels):
        if i in keep:
            if shown and i - 1 not in keep:
                shown.append("…")
            shown.append(f"{label} {delta:+.1f}%")
    return ", ".join(shown).replace(", …,", " …")


def _draw_baseline(axes: Any, samples: list[float]) -> None:
    if not samples:
        return
    axes.axvspan(min(samples), max(samples), color="#9db4d9", alpha=0.35, lw=0,
                 label="baseline range (min–max)")
    axes.axvline(statistics.median(samples), color=COLOURS["baseline"], lw=1, ls="--",
                 label="baseline median")


def _draw_row(axes: Any, y: int, row: dict[str, Any], *, metric: str, span: float) -> None:
    colour = COLOURS[row["verdict"]]
    samples = row["samples"]
    if not samples:
        # No value: the row says why at the axis' start, in its verdict's colour.
        axes.text(span * 0.01, y, row["note"], va="center", ha="left", fontsize=8,
                  color=colour, gid=f"note:{row['name']}", bbox=NOTE_BOX)
        return
    mid = statistics.median(samples)
    axes.errorbar([mid], [y], xerr=[[mid - min(samples)], [max(samples) - mid]], fmt="o",
                  color=colour, ecolor=colour, capsize=3, ms=6, gid=f"median:{row['name']}")
    axes.scatter(samples, [y] * len(samples), s=9, color=colour, alpha=0.45,
                 gid=f"samples:{row['name']}")
    # Offset in points, so that the note clears the median's dot at any scale.
    axes.annotate(row["note"], (max(samples), y), xytext=(7, 0), textcoords="offset points",
                  va="center", ha="left", fontsize=8, color=colour, gid=f"note:{row['name']}",
                  bbox=NOTE_BOX)


def _legend(axes: Any, rows: list[dict[str, Any]]) -> None:
    from matplotlib.lines import Line2D

    handles, _ = axes.get_legend_handles_labels()
    present = list(dict.fromkeys(row["verdict"] for row in rows[1:]))
    handles += [Line2D([], [], ls="", marker="o", color=COLOURS[v], label=v) for v in present]
    # Below the axis label, outside the plot, where no row's marker can hide behind it and
    # the title above keeps its place: 0.5 inch down, whatever the figure's height.
    below = -0.5 / (axes.figure.get_figheight() * axes.get_position().height)
    axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.0, below), fontsize=7,
                frameon=False, ncol=min(len(handles), 4))


def _label(name: str, width: int = 34) -> str:
    """A long name (a sweep point's) broken after its commas, so the plot keeps its width."""
    if len(name) <= width or "," not in name:
        return name
    return ",\n".join(name.split(","))


def _num(value: float) -> str:
    return f"{value:.4g}" if abs(value) < 10000 else f"{value:.0f}"
