"""The summary's chart: each approach's metric against the baseline, with its spread (PNG)."""

from __future__ import annotations

import io
import statistics

from jobs.core.records import RunRecord


def to_chart_png(records: list[RunRecord], *, metric: str, lower_is_better: bool) -> bytes | None:
    """A horizontal dot plot: median and min–max of each configuration; None without data."""
    rows = [(r.approach, r.samples(metric)) for r in records]
    if not any(samples for _, samples in rows):
        return None
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure  # no pyplot: no global state, thread-safe

    height = 1.2 + 0.35 * len(rows)
    figure = Figure(figsize=(7.5, height), dpi=110)
    axes = figure.add_subplot()
    baseline = next((s for name, s in rows if name == "baseline" and s), None)
    if baseline:
        axes.axvspan(min(baseline), max(baseline), color="#cccccc", alpha=0.5, lw=0)
        axes.axvline(statistics.median(baseline), color="#555555", lw=1, ls="--",
                     label="baseline median")
    for y, (_, samples) in enumerate(reversed(rows)):
        if not samples:
            # No measurement: say so on the row rather than leave it silently blank.
            axes.annotate("✗ no measurement", (0.01, y), xycoords=("axes fraction", "data"),
                          va="center", fontsize=7, color="#a83232")
            continue
        mid = statistics.median(samples)
        axes.errorbar([mid], [y], xerr=[[mid - min(samples)], [max(samples) - mid]],
                      fmt="o", color="#1f5fa8", capsize=3)
        axes.scatter(samples, [y] * len(samples), s=8, color="#1f5fa8", alpha=0.4)
    axes.set_yticks(range(len(rows)), [name for name, _ in reversed(rows)], fontsize=8)
    better = "lower is better" if lower_is_better else "higher is better"
    axes.set_xlabel(f"{metric} ({better}); bars: min–max of the repetitions")
    axes.grid(axis="x", alpha=0.3)
    if baseline:
        # Above the plot, where no approach's marker can hide behind it.
        axes.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), fontsize=7, frameon=False)
    figure.tight_layout()
    out = io.BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()
