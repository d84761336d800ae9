"""The charts as a person reads them (issue 32 item 8), each read back from the figure's own
objects: a mixed row of the batch chart gives each level's % in a few words, its note inside the
plot; the load Pareto chart's level labels (and a sweep's Pareto front numbers) cover neither one
another nor a point at the crowded low-latency end; `show --chart` writes a sweep's landscape
heat map (and its Pareto front) beside the batch's chart, the very charts its thread uploads;
the digest's trend has a panel for a preset whose results were unchanged or mixed, and keeps a
cancelled batch off its line."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from matplotlib.text import Text  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

import jobs.charts.sweep as sweep_charts  # noqa: E402
import jobs.charts.trend as trend_charts  # noqa: E402
from bot.cli.main import main  # noqa: E402
from bot.thread.summary_message import summary_uploads  # noqa: E402
from jobs.charts.loads import pareto_figure  # noqa: E402
from jobs.charts.summary import summary_figure  # noqa: E402
from jobs.core.advice import (
    analyze,  # noqa: E402
    load_remedies,  # noqa: E402
)
from jobs.core.plans import (  # noqa: E402
    BatchPlan,
    load_preset,  # noqa: E402
    resolve,
)
from jobs.core.records import RunRecord  # noqa: E402
from jobs.core.rules import load_rules  # noqa: E402
from jobs.core.verdicts import Metric  # noqa: E402
from jobs.store import Store  # noqa: E402
from tests.bot.test_cli import specbench  # noqa: E402
from tests.conftest import make_plan, make_record  # noqa: E402
from tests.jobs.test_batch_chart import texts  # noqa: E402
from tests.jobs.test_chart_legibility import cut_texts, record, sweep_values  # noqa: E402
from tests.jobs.test_level_report import batch as leveled_batch  # noqa: E402
from tests.jobs.test_level_verdicts import SLO  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def judged(records: list[RunRecord], metric: Metric = SLO) -> dict[str, Any]:
    return analyze(records, metric=metric, rules=load_rules(), remedies=load_remedies())


# ------------------------------------------------------------------------ the batch chart


def test_a_mixed_row_gives_each_levels_percent_and_not_the_crossover_sentence() -> None:
    records = leveled_batch()  # eagle3: +30% at c=1 and +12% at 4, -10% at 16, -30% at 64
    report = judged(records)
    eagle = next(r for r in report["results"] if r["approach"] == "eagle3")
    assert eagle["verdict"] == "mixed"
    note, _ = texts(summary_figure(report, records))["eagle3"]
    assert note == "± mixed: c=1 +30.0%, c=4 +12.0%, c=16 -10.0%, c=64 -30.0%"
    assert eagle["crossover"]["text"] not in note  # the summary's text says it already


def test_a_mixed_row_of_many_levels_keeps_its_ends_and_its_turn() -> None:
    levels = [1, 2, 4, 8, 16, 32, 64]
    deltas = [59.8, 51.0, 42.9, 25.0, 7.1, -6.0, -15.3]
    by_load = [{"load": {"max-concurrency": n}, "delta_pct": d,
                "verdict": "improved" if d > 5 else "regressed"}
               for n, d in zip(levels, deltas, strict=True)]
    report = {"batch": "b-1", "preset": "eagle3", "metric": "output_throughput",
              "lower_is_better": False, "fingerprint": {},
              "loads": {"knob": "max-concurrency", "levels": levels},
              "baseline": {"approach": "baseline", "value": 82.0},
              "results": [{"approach": "eagle3", "verdict": "mixed", "value": 131.0,
                           "delta_pct": 59.8, "by_load": by_load}]}
    records = [make_record("baseline", samples=[81.0, 82.0, 83.0]),
               make_record("eagle3", samples=[130.0, 131.0, 132.0])]
    figure = summary_figure(report, records)
    note, _ = texts(figure)["eagle3"]
    assert note == "± mixed: c=1 +59.8% … c=16 +7.1%, c=32 -6.0%, c=64 -15.3%"
    # the rows are the lowest level's, and the axis says so
    assert figure.axes[0].get_xlabel().startswith("output_throughput at max-concurrency 1 (")


def test_every_note_ends_inside_the_plot() -> None:
    records = leveled_batch()
    figure = summary_figure(judged(records), records)
    figure.draw_without_rendering()
    [axes] = [a for a in figure.axes]
    frame = axes.get_window_extent()
    notes = [t for t in axes.texts if (t.get_gid() or "").startswith("note:")]
    assert len(notes) == 5
    for note in notes:
        box = note.get_window_extent()
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1, (note.get_text(), box.extents,
                                                            frame.extents)


# ------------------------------------------------------------------------ the load Pareto chart

LEVELS = [1, 2, 4, 8, 16, 32, 64]
# (throughput tok/s, p99 TTFT ms) per level of four configurations on an 8-GPU host: at the
# light loads every configuration answers in 60 to 80 ms, so their points crowd together.
CURVES = {
    "baseline": [(82, 61), (158, 63), (301, 70), (560, 92), (980, 160), (1510, 420),
                 (1890, 1450)],
    "eagle3": [(131, 66), (240, 69), (430, 78), (700, 118), (1050, 240), (1420, 690),
               (1600, 2300)],
    "eagle3-topk-4": [(127, 64), (236, 67), (428, 75), (705, 110), (1080, 215), (1500, 600),
                      (1750, 2050)],
    "cuda-graph-max-bs-128": [(84, 60), (161, 62), (306, 68), (571, 88), (1010, 150),
                              (1490, 440), (1820, 1600)],
}


def crowded_loads() -> dict[str, Any]:
    def by_load(name: str) -> list[dict[str, Any]]:
        return [{"load": {"max-concurrency": n}, "verdict": "improved", "value": float(t),
                 "delta_pct": None, "slo": "violated" if ttft > 1000 else "met", "why": "",
                 "figures": {"output_throughput": float(t), "p99_ttft_ms": float(ttft)}}
                for n, (t, ttft) in zip(LEVELS, CURVES[name], strict=True)]

    return {"preset": "eagle3", "batch": "b-7f3a", "fingerprint": {},
            "metric": "output_throughput", "lower_is_better": False,
            "loads": {"knob": "max-concurrency", "levels": LEVELS},
            "slo": {"p99_ttft_ms": 1000.0},
            "baseline": {"approach": "baseline", "value": 82.0, "by_load": by_load("baseline")},
            "results": [{"approach": name, "verdict": "mixed", "value": CURVES[name][0][0],
                         "by_load": by_load(name)} for name in list(CURVES)[1:]]}


def text_box(text: Any) -> Any:
    """A label's text as drawn, without any leader line to its point."""
    text.get_window_extent()  # an annotation's text moves to its offset here
    return Text.get_window_extent(text)


def test_the_load_pareto_labels_cover_neither_one_another_nor_a_point() -> None:
    figure = pareto_figure(crowded_loads())
    assert cut_texts(figure) == []
    [axes] = figure.axes
    figure.draw_without_rendering()
    labels = [t for t in axes.texts if t.get_text().startswith("c=")]
    boxes = [text_box(t) for t in labels]
    for i, box in enumerate(boxes):
        for j in range(i):
            assert not box.overlaps(boxes[j]), (labels[i].get_text(), labels[j].get_text())
    dot = 3.0 * figure.dpi / 72  # a dot's radius, in pixels
    dots = [axes.transData.transform((float(ttft), float(t)))
            for curve in CURVES.values() for t, ttft in curve]
    for label, box in zip(labels, boxes, strict=True):
        for x, y in dots:
            assert not box.overlaps(Bbox.from_extents(x - dot, y - dot, x + dot, y + dot)), (
                label.get_text(), (x, y))
    # each line's highest level is named at its own point, the light loads too
    named = {(tuple(t.xy), level) for t in labels for level in t.get_text().split(", ")}
    for curve in CURVES.values():
        assert ((float(curve[-1][1]), float(curve[-1][0])), "c=64") in named
    assert any(level == "c=1" for _, level in named)
    # the latencies span 38x: a log axis, so that the light loads are not one corner
    assert axes.get_xscale() == "log"


@pytest.fixture
def drawn_sweep(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The sweep charts' figures, as their module rendered them to PNG."""
    figures: list[Any] = []
    render = sweep_charts._png

    def keep(figure: Any) -> bytes:
        png: bytes = render(figure)
        figures.append(figure)
        return png

    monkeypatch.setattr(sweep_charts, "_png", keep)
    return figures


def test_the_sweep_pareto_numbers_cover_neither_one_another_nor_a_point(
        drawn_sweep: list[Any]) -> None:
    plan, values = sweep_values("eagle3-tune", measured=150)
    records = [record("baseline", 45.0, 9.0)]
    records += [record(name, value, 6.0 + value * 0.1 + (n % 5) * 0.3)
                for n, (name, value) in enumerate(values.items())]
    assert sweep_charts.pareto_png(records, metric=plan.metric) is not None
    [figure] = drawn_sweep
    assert cut_texts(figure) == []
    [axes] = figure.axes
    numbers = [t for t in axes.texts if t.get_text()[:1].isdigit()]
    boxes = [text_box(t) for t in numbers]
    for i, box in enumerate(boxes):
        for j in range(i):
            assert not box.overlaps(boxes[j]), (numbers[i].get_text(), numbers[j].get_text())
    dot = 3.0 * figure.dpi / 72
    for number, box in zip(numbers, boxes, strict=True):
        for r in records:
            x, y = axes.transData.transform((r.samples("median_itl_ms")[0],
                                             r.samples("output_throughput")[0]))
            assert not box.overlaps(Bbox.from_extents(x - dot, y - dot, x + dot, y + dot)), (
                number.get_text(), r.approach)
    # every keyed point of the front is numbered, points that coincide with one label
    named = {n for t in numbers for n in t.get_text().split(", ")}
    key = next(t for t in figure.texts if t.get_gid() == "front:key").get_text()
    keyed = {line.split()[0] for line in key.splitlines()[1:] if line[:1].isdigit()}
    assert named == keyed and len(keyed) == sweep_charts.MAX_KEYED


# ------------------------------------------------------------------------ show --chart, a sweep


def sweep_batch() -> tuple[BatchPlan, list[RunRecord]]:
    """cpu-demo's sweep batch as the demo stored it: its baseline and five of its 18 points,
    each with a throughput and a median ITL."""
    plan = resolve(load_preset("cpu-demo"))
    assert plan.sweep is not None
    measured = {0: 965.3, 2: 1241.0, 4: 1400.0, 17: 2066.0, 14: 2345.0}
    records = [make_record("baseline", samples=[650.5, 652.0, 659.3], batch="b-sweep",
                           preset="cpu-demo")]
    for n, value in measured.items():
        records.append(make_record(plan.sweep.points[n].approach, samples=[value],
                                   batch="b-sweep", preset="cpu-demo"))
    return plan, [dataclasses.replace(r, metrics={**r.metrics, "median_itl_ms": [
        2.0 + r.samples("output_throughput")[0] / 1000]}) for r in records]


def test_show_chart_writes_a_sweeps_landscape_heat_map_and_pareto_front(tmp_path: Path) -> None:
    plan, records = sweep_batch()
    report = judged(records, Metric(min_effect_pct=5.0))
    with Store() as store:
        store.create_batch(batch_id="b-sweep", preset="cpu-demo", engine="local",
                           queue="default", requested_by="u", plan=plan)
        store.put_records(list(enumerate(records)))
        store.end("b-sweep", "done", report=report)
    chart = tmp_path / "sweep.png"
    result = specbench("show", "b-sweep", "--chart", str(chart))
    assert result.returncode == 0, result.stderr
    written = [chart, tmp_path / "sweep-landscape.png", tmp_path / "sweep-pareto.png"]
    assert result.stderr.strip().splitlines() == [f"chart written to {p}" for p in written]
    # the very charts the sweep's thread uploads
    uploads = {f.filename: f.content for f in summary_uploads(
        records, report=report, batch_id="b-sweep", plan=plan, redact=lambda t: t)}
    assert written[1].read_bytes() == uploads["b-sweep-landscape.png"]
    assert written[2].read_bytes() == uploads["b-sweep-pareto.png"]
    assert all(path.read_bytes().startswith(PNG) for path in written)


def test_a_sweeps_landscape_names_the_baseline_it_is_read_against(drawn_sweep: list[Any]) -> None:
    plan, records = sweep_batch()
    report = judged(records, Metric(min_effect_pct=5.0))
    summary_uploads(records, report=report, batch_id="b-sweep", plan=plan, redact=lambda t: t)
    heat = next(f for f in drawn_sweep if f.axes[0].images)
    assert heat.axes[0].get_title().splitlines()[-1] == "baseline 652 tok/s"


def test_a_one_knob_landscape_draws_the_baseline_and_says_not_run_inside_the_plot(
        drawn_sweep: list[Any]) -> None:
    from jobs.core.sweeps import SweepPlan

    plan = resolve(load_preset("cpu-demo"))
    assert plan.sweep is not None
    knob = "prompt-lookup-num-tokens"
    line = SweepPlan(name="lookup", extends=plan.sweep.extends, search="grid", budget=None,
                     grid={knob: plan.sweep.grid[knob]}, confirm_reps=3)
    run = {p.approach: 900.0 + 250 * p.index[0] for p in line.points[1:]}  # the first not run
    sweep_charts.landscape_png(line, run, metric="output_throughput", lower_is_better=False,
                               winner=line.points[-1].approach, baseline=652.0)
    [figure] = drawn_sweep
    [axes] = figure.axes
    figure.draw_without_rendering()
    [note] = [t for t in axes.texts if t.get_text() == "not run"]
    frame, box = axes.get_window_extent(), note.get_window_extent()
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1
    [base] = [line for line in axes.lines if line.get_label() == "baseline 652 tok/s"]
    assert list(base.get_ydata()) == [652.0, 652.0]
    assert not box.overlaps(base.get_window_extent())


# ------------------------------------------------------------------------ the digest's trend


def store_batch(store: Store, batch_id: str, records: list[RunRecord], *, preset: str,
                hours_ago: float, state: str = "done", metric: Metric = SLO) -> None:
    records = [dataclasses.replace(r, batch=batch_id, preset=preset) for r in records]
    store.create_batch(batch_id=batch_id, preset=preset, engine="local", queue="default",
                       requested_by="u", plan=make_plan(),
                       created_at=dt.datetime.now(dt.UTC) - dt.timedelta(hours=hours_ago))
    store.put_records(list(enumerate(records)))
    store.end(batch_id, state, report=judged(records, metric))


@pytest.fixture
def drawn_trend(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The trend figures `digest --chart` draws, as its own module builds them."""
    figures: list[Any] = []
    build = trend_charts.trend_figure

    def keep(*args: Any, **kwargs: Any) -> Any:
        figure = build(*args, **kwargs)
        figures.append(figure)
        return figure

    monkeypatch.setattr(trend_charts, "trend_figure", keep)
    return figures


def test_the_digest_chart_shows_unchanged_and_mixed_presets_and_no_cancelled_dip(
        tmp_path: Path, drawn_trend: list[Any], capsys: pytest.CaptureFixture[str]) -> None:
    plain = Metric(min_effect_pct=2.0)
    base = make_record("baseline", samples=[80.0, 81.0, 82.0])
    with Store() as store:
        # a preset whose one result was mixed (better at c=1 and 4, worse at 16 and 64)
        store_batch(store, "b-loads", leveled_batch()[:2], preset="cpu-loads", hours_ago=30)
        # a preset whose one result was unchanged
        store_batch(store, "b-same", [base, make_record("same", samples=[80.5, 81.0, 81.5])],
                    preset="cpu-same", hours_ago=28, metric=plain)
        # eagle3: improved, then a batch cancelled after its one regression, then improved
        store_batch(store, "b-good", [base, make_record("cg-128", samples=[88.0, 89.0, 90.0])],
                    preset="eagle3", hours_ago=26, metric=plain)
        store_batch(store, "b-cut", [base, make_record("tree", samples=[16.0, 16.2, 16.4]),
                                     make_record("later", samples=[], status="cancelled"),
                                     make_record("never", samples=[], status="skipped")],
                    preset="eagle3", hours_ago=24, state="cancelled", metric=plain)
        store_batch(store, "b-next", [base, make_record("cg-64", samples=[86.0, 87.0, 88.0])],
                    preset="eagle3", hours_ago=22, metric=plain)
    chart = tmp_path / "trend.png"
    assert main(["digest", "--chart", str(chart)]) == 0
    capsys.readouterr()
    assert chart.read_bytes().startswith(PNG)
    [figure] = drawn_trend
    assert cut_texts(figure) == []
    panels = {axes.get_title().split(" on ")[0]: axes for axes in figure.axes}
    assert sorted(panels) == ["cpu-loads", "cpu-same", "eagle3"]
    loads = panels["cpu-loads"]
    [label] = [t.get_text() for t in loads.texts]
    assert label.startswith("eagle3\nmixed: c=1 +30.0%") and "c=64 -30.0%" in label
    # the mixed result's bar spans its levels, from -30% to +30%
    [span] = [c for c in loads.collections if (c.get_gid() or "").startswith("levels:")]
    [[(_, low), (_, high)]] = [segment.tolist() for segment in span.get_segments()]
    assert (low, high) == (-30.0, 30.0)
    assert [t.get_text() for t in panels["cpu-same"].texts] == ["same\n+0.0%, 81 tok/s"]
    eagle = panels["eagle3"]
    [line] = [line for line in eagle.lines if line.get_gid() == "trend"]
    # experiments in the order they started: b-loads, b-same, b-good, b-cut, b-next
    assert list(line.get_xdata()) == [2, 4]  # b-good and b-next; b-cut (at 3) off the line
    assert min(line.get_ydata()) > 0
    [cut] = [c for c in eagle.collections if c.get_gid() == "cancelled"]
    assert cut.get_offsets().tolist() == [[3.0, -80.0]]
    assert any(t.get_text().endswith("(batch cancelled)") for t in eagle.texts)
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    assert "batch cancelled (off the line)" in legend
