"""The charts that go beside a batch's summary chart, each a file named by its suffix: with load
levels the metric against load and the load Pareto front (`jobs.charts.loads`), with a capacity
search each configuration's capacity against the baseline's (`jobs.charts.capacity`), for a
sweep its landscape and its throughput-against-latency Pareto front (`jobs.charts.sweep`). The
thread uploads them as `{batch}-{suffix}.png`; `show --chart FILE.png` writes them as
`FILE-{suffix}.png`: the same charts on every surface."""

from __future__ import annotations

from typing import Any

from jobs.charts.capacity import capacity_charts
from jobs.charts.chart_file import ChartFile
from jobs.charts.loads import load_charts
from jobs.charts.sweep import landscape_png, pareto_png
from jobs.core.levels import Points, point_value
from jobs.core.plans import BatchPlan
from jobs.core.records import RunRecord

__all__ = ["ChartFile", "extra_charts", "sweep_charts"]


def extra_charts(
    report: dict[str, Any], records: list[RunRecord], *, plan: BatchPlan
) -> list[ChartFile]:
    """Every chart beside the summary chart, in the order they are posted; [] for a batch
    without load levels that is no sweep."""
    return [*load_charts(report), *capacity_charts(report), *sweep_charts(records, plan=plan)]


def sweep_charts(records: list[RunRecord], *, plan: BatchPlan) -> list[ChartFile]:
    """A sweep's landscape and its Pareto front, each when there is data; [] for no sweep."""
    sweep = plan.sweep
    if sweep is None:
        return []
    points = Points.of(plan, records)
    best = points.best()  # under an SLO, the best point that met it at every level
    base = next((r for r in records if r.role == "baseline"), None)
    files: list[ChartFile] = []
    landscape = landscape_png(sweep, points.known()[0], metric=plan.metric,
                              lower_is_better=plan.lower_is_better,
                              winner=best[0] if best else None,
                              baseline=None if base is None else point_value(base, plan.metric))
    if landscape is not None:
        files.append(ChartFile("landscape", landscape,
                               f"sweep {sweep.name}: {plan.metric} over {', '.join(sweep.grid)}"))
    pareto = pareto_png(records, metric=plan.metric)
    if pareto is not None:
        files.append(ChartFile("pareto", pareto,
                               f"{plan.metric} against latency: the Pareto front"))
    return files
