"""A sweep's charts: the landscape leaves points not run blank, the Pareto front is the set no
configuration beats on both throughput and latency."""

from __future__ import annotations

import math
from typing import Any

import pytest

from bot.thread.summary_message import summary_uploads
from jobs.charts.axes import pareto_front
from jobs.charts.sweep import heat_cells, landscape_png, pareto_png
from jobs.core.advice import analyze, load_remedies
from jobs.core.records import RunRecord
from jobs.core.rules import load_rules
from jobs.core.verdicts import Metric
from tests.jobs.test_search import plan_of

pytest.importorskip("matplotlib")
PNG = b"\x89PNG\r\n\x1a\n"


def record(approach: str, value: float, itl: float | None = None, *, role: str = "approach"
           ) -> RunRecord:
    metrics: dict[str, object] = {"output_throughput": [value], "accept_length": None}
    if itl is not None:
        metrics["median_itl_ms"] = [itl]
    return RunRecord(
        batch="b-1", preset="tune", approach=approach, role=role, parent=None, hypothesis="",
        change={"server_args": {}, "env": {}}, server_args={}, env={}, status="ok",
        started_at="2026-01-01T00:00:00Z", finished_at="2026-01-01T00:01:00Z", exit_code=0,
        log_tail="", metrics=metrics, fingerprint={},
    )


def test_the_heat_map_leaves_points_not_run_blank() -> None:
    plan = plan_of()
    assert plan.sweep is not None
    run = {p.approach: 80.0 + p.index[0] for p in plan.sweep.points[:6]}
    cells = heat_cells(plan.sweep, run, lower_is_better=False)
    assert len(cells) == 8 and len(cells[0]) == 5
    assert cells[0][:5] == [80.0] * 5 and cells[1][0] == 81.0
    assert all(math.isnan(c) for row in cells[2:] for c in row)
    assert landscape_png(plan.sweep, run, metric="output_throughput",
                         lower_is_better=False).startswith(PNG)  # type: ignore[union-attr]
    assert landscape_png(plan.sweep, {}, metric="m", lower_is_better=False) is None


def test_one_knob_is_a_line() -> None:
    text = __import__("tests.jobs.test_search", fromlist=["SWEPT"]).SWEPT
    text = text.replace("    mem-fraction-static: [0.75, 0.8, 0.85, 0.88, 0.9]\n", "")
    plan = plan_of(text.replace("budget: 12", "budget: 4"))
    assert plan.sweep is not None
    values = {plan.sweep.points[1].approach: 90.0, plan.sweep.points[3].approach: 95.0}
    png = landscape_png(plan.sweep, values, metric="output_throughput", lower_is_better=False,
                        winner=plan.sweep.points[3].approach)
    assert png is not None and png.startswith(PNG)


def test_the_pareto_front() -> None:
    points = [("a", 100.0, 10.0), ("b", 90.0, 8.0), ("c", 80.0, 9.0), ("d", 110.0, 12.0),
              ("e", 100.0, 11.0)]
    assert pareto_front(points) == ["b", "a", "d"]  # c is beaten by b, e by a


def test_a_sweep_batch_uploads_its_landscape_and_pareto_front() -> None:
    plan = plan_of()
    assert plan.sweep is not None
    points = plan.sweep.points
    records = [record("baseline", 80.0, 9.0, role="baseline"),
               record(points[0].approach, 85.0, 10.0), record(points[7].approach, 92.0, 9.5)]
    report = analyze(records, metric=Metric(), rules=load_rules(), remedies=load_remedies())
    files = summary_uploads(records, report=report, batch_id="b-1", plan=plan,
                            redact=lambda t: t)
    names = [f.filename for f in files]
    assert names == ["b-1-chart.png", "b-1-landscape.png", "b-1-pareto.png", "b-1-runs.jsonl"]
    assert files[0].title == ("output_throughput (tok/s): each approach against the baseline, "
                              "coloured by its verdict")
    assert all(f.content.startswith(PNG) for f in files if f.filename.endswith(".png"))
    assert pareto_png(records[:1], metric="output_throughput") is None


def test_sweep_axes_carry_the_units(monkeypatch: pytest.MonkeyPatch) -> None:
    import jobs.charts.sweep as charts

    figures: list[Any] = []
    monkeypatch.setattr(charts, "_png", lambda figure: figures.append(figure) or PNG)
    plan = plan_of()
    assert plan.sweep is not None
    run = {p.approach: 80.0 + p.index[0] for p in plan.sweep.points[:6]}
    charts.landscape_png(plan.sweep, run, metric="output_throughput", lower_is_better=False)
    [heat] = figures
    colorbar = heat.axes[1]  # the heat map's colour scale says what its colours measure
    assert colorbar.get_ylabel() == "output_throughput (tok/s, higher is better)"
    records = [record("baseline", 80.0, 9.0, role="baseline"), record("a", 85.0, 10.0)]
    charts.pareto_png(records, metric="output_throughput")
    pareto = figures[-1].axes[0]
    assert pareto.get_xlabel() == "median_itl_ms (ms, lower is better)"
    assert pareto.get_ylabel() == "output_throughput (tok/s, higher is better)"
    text = __import__("tests.jobs.test_search", fromlist=["SWEPT"]).SWEPT
    one = plan_of(text.replace("    mem-fraction-static: [0.75, 0.8, 0.85, 0.88, 0.9]\n", "")
                  .replace("budget: 12", "budget: 4"))
    assert one.sweep is not None
    charts.landscape_png(one.sweep, {one.sweep.points[1].approach: 90.0},
                         metric="median_ttft_ms", lower_is_better=True)
    assert figures[-1].axes[0].get_ylabel() == "median_ttft_ms (ms, lower is better)"
    assert charts.axis_label("score", "higher is better") == "score (higher is better)"
