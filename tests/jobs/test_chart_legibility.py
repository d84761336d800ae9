"""Every chart the product posts is legible as posted: each text lies inside the figure once it is
drawn (nothing cut at an edge), a heat map's numbers contrast with their cell (WCAG's 4.5:1,
computed here from the drawn colours, not taken from the module), and the trend's point labels do
not cover one another."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import replace
from typing import Any

import pytest

from jobs.core.plans import load_preset, resolve
from jobs.core.records import RunRecord
from tests.jobs.test_batch_chart import batch
from tests.jobs.test_digest import NOW, week

pytest.importorskip("matplotlib")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

import jobs.charts.sweep as sweep_charts  # noqa: E402
from jobs.charts.axes import pareto_front  # noqa: E402
from jobs.charts.summary import summary_figure  # noqa: E402
from jobs.charts.trend import trend_figure  # noqa: E402
from jobs.core.digest import experiment_best  # noqa: E402

TOLERANCE_PX = 1.0


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The sweep charts' figures, after the module rendered them to PNG its own way."""
    figures: list[Any] = []
    render = sweep_charts._png

    def keep(figure: Any) -> bytes:
        png: bytes = render(figure)
        figures.append(figure)
        return png

    monkeypatch.setattr(sweep_charts, "_png", keep)
    return figures


def cut_texts(figure: Any) -> list[str]:
    """The visible texts that reach past the figure's edge once drawn (an axis counts as one:
    its tick labels, only those inside its limits, which alone are drawn, and its label)."""
    canvas = FigureCanvasAgg(figure)  # what savefig draws a pyplot-free figure with
    canvas.draw()
    renderer = canvas.get_renderer()
    shown: list[tuple[str, Any]] = [(t.get_text(), t) for t in figure.texts]
    for legend in figure.legends:
        shown += [(t.get_text(), t) for t in legend.get_texts()]
    for n, axes in enumerate(figure.axes):
        shown += [(t.get_text(), t) for t in axes.texts]
        shown += [(t.get_text(), t) for t in (axes.title, axes._left_title, axes._right_title)]
        if axes.get_legend() is not None:
            shown += [(t.get_text(), t) for t in axes.get_legend().get_texts()]
        shown += [(f"x axis of axes {n}", axes.xaxis), (f"y axis of axes {n}", axes.yaxis)]
    frame = figure.bbox
    cut = []
    for name, artist in shown:
        if not artist.get_visible() or not name.strip():
            continue
        box = artist.get_tightbbox(renderer) if artist in (
            a for ax in figure.axes for a in (ax.xaxis, ax.yaxis)) else (
            artist.get_window_extent(renderer))
        if box is None:
            continue
        if (box.x0 < frame.x0 - TOLERANCE_PX or box.y0 < frame.y0 - TOLERANCE_PX
                or box.x1 > frame.x1 + TOLERANCE_PX or box.y1 > frame.y1 + TOLERANCE_PX):
            cut.append(f"{name[:60]!r} at {tuple(round(v) for v in box.extents)} of "
                       f"{tuple(round(v) for v in frame.extents)}")
    assert len(shown) > 4  # the walk found the chart's texts
    return cut


def luminance(colour: Any) -> float:
    r, g, b, _ = to_rgba(colour)
    r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: Any, b: Any) -> float:
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def sweep_values(preset: str, *, measured: int | None = None) -> tuple[Any, dict[str, float]]:
    """A shipped preset's sweep, its points given values across the whole colour scale."""
    plan = resolve(load_preset(preset))
    assert plan.sweep is not None
    points = list(plan.sweep.points)[:measured]
    values = {p.approach: 40.0 + 10.0 * p.index[0] + 3.0 * sum(p.index[1:]) for p in points}
    return plan, values


def record(approach: str, tput: float, itl: float) -> RunRecord:
    return RunRecord(
        batch="b-1", preset="eagle3-tune", approach=approach, role="approach", parent=None,
        hypothesis="", change={"server_args": {}, "env": {}}, server_args={}, env={},
        status="ok", started_at="2026-01-01T00:00:00Z", finished_at="2026-01-01T00:01:00Z",
        exit_code=0, log_tail="", fingerprint={},
        metrics={"output_throughput": [tput], "median_itl_ms": [itl]})


@pytest.mark.parametrize("preset", ["eagle3-tune", "cpu-demo"])
def test_the_heat_maps_texts_stay_inside_it(preset: str, drawn: list[Any]) -> None:
    plan, values = sweep_values(preset)
    best = max(values, key=lambda name: values[name])
    assert sweep_charts.landscape_png(plan.sweep, values, metric=plan.metric,
                                      lower_is_better=False, winner=best) is not None
    [figure] = drawn
    assert len(figure.axes[0].images) == 1  # a heat map
    assert cut_texts(figure) == []


def test_a_one_row_heat_maps_scale_label_stays_inside_it(drawn: list[Any]) -> None:
    from jobs.core.sweeps import SweepPlan

    flat = SweepPlan(name="flat", extends=None, search="grid", budget=None, confirm_reps=3,
                     grid={"cuda-graph-max-bs": [512], "mem-fraction-static": [0.8, 0.85, 0.88]})
    run = {p.approach: 70.0 + p.index[1] for p in flat.points}
    sweep_charts.landscape_png(flat, run, metric="output_throughput", lower_is_better=False)
    [figure] = drawn
    assert cut_texts(figure) == []


@pytest.mark.parametrize("lower_is_better", [False, True])
def test_each_heat_map_number_contrasts_with_its_cell(lower_is_better: bool,
                                                     drawn: list[Any]) -> None:
    plan, values = sweep_values("eagle3-tune", measured=150)  # some cells not run
    sweep_charts.landscape_png(plan.sweep, values, metric=plan.metric,
                               lower_is_better=lower_is_better)
    [figure] = drawn
    axes = figure.axes[0]
    [image] = axes.images
    cells = image.get_array()
    numbers = 0
    for text in axes.texts:
        i, j = round(text.get_position()[1]), round(text.get_position()[0])
        cell = "white" if cells.mask[i, j] else image.cmap(image.norm(cells[i, j]))
        ratio = contrast(text.get_color(), cell)
        assert ratio >= 4.5, f"{text.get_text()!r} on cell {i},{j}: {ratio:.2f}:1"
        numbers += not cells.mask[i, j]
    assert numbers >= 6
    # The scale runs from dark to light: both text colours are needed, neither fits all.
    assert {to_rgba(t.get_color()) for t in axes.texts if t.get_text() != "·"} == {
        to_rgba("black"), to_rgba("white")}


def test_the_line_chart_stays_inside_it(drawn: list[Any]) -> None:
    plan, values = sweep_values("cpu-demo")
    assert plan.sweep is not None
    from jobs.core.sweeps import SweepPlan

    [knob, *_] = plan.sweep.grid
    line = SweepPlan(name="lookup-with-a-long-name", extends=plan.sweep.extends,
                     grid={knob: plan.sweep.grid[knob]}, search="grid", budget=None,
                     confirm_reps=3)
    run = {p.approach: 20.0 + p.index[0] for p in line.points[1:]}  # the first not run
    sweep_charts.landscape_png(line, run, metric="output_throughput", lower_is_better=False,
                               winner=line.points[-1].approach)
    [figure] = drawn
    assert cut_texts(figure) == []


@pytest.mark.parametrize("measured", [20, 216])
def test_the_pareto_fronts_long_names_stay_inside_it(measured: int, drawn: list[Any]) -> None:
    plan, values = sweep_values("eagle3-tune", measured=measured)
    records = [record("baseline", 45.0, 9.0)]
    records += [record(name, value, 6.0 + value * 0.1 + (n % 5) * 0.3)
                for n, (name, value) in enumerate(values.items())]
    assert sweep_charts.pareto_png(records, metric=plan.metric) is not None
    [figure] = drawn
    assert cut_texts(figure) == []
    key = next(t for t in figure.texts if t.get_gid() == "front:key").get_text()
    front = pareto_front([(r.approach, r.samples("output_throughput")[0],
                                        r.samples("median_itl_ms")[0]) for r in records])
    # every point of the front is named in the key, or counted when there are too many
    lines = key.replace(",\n      ", ",").splitlines()  # a name broken after its commas
    named = [name for n, name in enumerate(front, start=1) if f"{n}  {name}" in lines]
    assert len(named) == min(len(front), sweep_charts.MAX_KEYED)
    if len(front) > sweep_charts.MAX_KEYED:
        assert f"{len(front) - sweep_charts.MAX_KEYED} more on the front" in key


def test_the_summary_charts_texts_stay_inside_it() -> None:
    report, records = batch()
    long = "tune@cuda-graph-max-bs=512,mem-fraction-static=0.85,speculative-num-steps=5"
    report["results"][0] = {**report["results"][0], "approach": long}
    records[1] = replace(records[1], approach=long)
    assert cut_texts(summary_figure(report, records)) == []


def test_the_trend_charts_texts_stay_inside_it() -> None:
    rows, records = week()
    figure = trend_figure(experiment_best(rows, records, now=NOW, days=7),
                          start=dt.date(2026, 11, 30), end=dt.date(2026, 12, 7))
    assert cut_texts(figure) == []


def test_the_trends_labels_neither_cut_nor_cover_one_another() -> None:
    """A sweep point's long name, broken over lines at the panel's right edge, once reached over
    its neighbour's label."""
    long = "tune@cuda-graph-max-bs=128,mem-fraction-static=0.88,speculative-num-steps=5"
    points = [{"at": f"2026-12-0{d}T09:00:00+00:00", "day": f"2026-12-0{d}", "batch": f"b-{d}",
               "approach": name, "delta_pct": delta, "value": 82 * (1 + delta / 100),
               "verdict": verdict}
              for d, name, delta, verdict in [(1, "cg-128", 9.1, "improved"),
                                              (2, "eagle3", -34.0, "regressed"),
                                              (3, "cuda-graph-max-bs-128", 0.4, "unchanged"),
                                              (4, long, 12.3, "improved")]]
    series = [{"preset": "eagle3-tune", "hardware": "8x NVIDIA RTX PRO 6000 Blackwell Server "
               "Edition", "metric": "output_throughput", "unit": "tok/s", "points": points}]
    figure = trend_figure(series, start=dt.date(2026, 11, 30), end=dt.date(2026, 12, 7))
    assert cut_texts(figure) == []
    [axes] = figure.axes
    boxes = [axes.title.get_window_extent()] + [t.get_window_extent() for t in axes.texts]
    assert len(boxes) == 5
    for i, box in enumerate(boxes):
        for other in boxes[:i]:
            assert not box.overlaps(other), (box.bounds, other.bounds)


def test_luminance_is_wcags() -> None:
    assert math.isclose(contrast("black", "white"), 21.0)
    assert math.isclose(contrast("#767676", "white"), 4.54, abs_tol=0.01)  # WCAG's own example
