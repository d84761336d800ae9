"""The digest's trend: each experiment's best judged delta per preset and hardware, and its
chart, checked from the figure's own objects (title, units, verdict colours, zero line and
axis, one point per experiment)."""

from __future__ import annotations

import datetime as dt

from matplotlib.colors import to_hex

from jobs.charts.trend import COLOURS, to_trend_png, trend_figure
from jobs.core.digest import experiment_best
from jobs.core.plans import BatchPlan
from jobs.core.sweeps import SweepPlan
from tests.conftest import make_plan
from tests.jobs.test_digest import NOW, confounded_history, rec, result, row, week

START, END = dt.date(2026, 11, 30), dt.date(2026, 12, 7)


def test_each_experiment_keeps_its_best_judged_delta_per_preset_and_hardware() -> None:
    rows, records = week()
    series = experiment_best(rows, records, now=NOW, days=7)
    # b-old (20 days ago) is outside the window; failed and inconclusive results never count
    # (b-2's other-gpu run was inconclusive: no H200 series); b-2's best is eagle3's regression
    (rtx,) = series
    assert rtx["hardware"] == "8x NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert [(p["day"], p["approach"], p["delta_pct"], p["value"]) for p in rtx["points"]] == [
        ("2026-12-04", "cg-128", 9.1, 89.5), ("2026-12-06", "eagle3", -34.0, 54.1)]
    assert (rtx["metric"], rtx["unit"]) == ("output_throughput", "tok/s")


def test_days_follow_the_configured_time_zone() -> None:
    rows, records = week()
    # b-2 was created at 09:00 UTC on Dec 6, which is still Dec 5 in Honolulu (UTC-10)
    series = experiment_best(rows, records, now=NOW, days=7, tz="Pacific/Honolulu")
    days = [p["day"] for s in series for p in s["points"]]
    assert "2026-12-05" in days and "2026-12-06" not in days


def test_the_trend_chart_is_a_png_and_none_without_data() -> None:
    rows, records = week()
    png = to_trend_png(experiment_best(rows, records, now=NOW, days=7), start=START, end=END)
    assert png is not None and png.startswith(b"\x89PNG")
    assert to_trend_png([], start=START, end=END) is None
    assert to_trend_png(experiment_best(rows, records, now=NOW, days=0.01), start=END,
                        end=END) is None


def test_the_chart_has_its_title_units_verdict_colours_and_a_zero_based_axis() -> None:
    rows, records = week()
    figure = trend_figure(experiment_best(rows, records, now=NOW, days=7), start=START, end=END)
    assert "best judged Δ vs own baseline" in figure._suptitle.get_text()
    (axes,) = figure.axes
    assert axes.get_title() == "eagle3 on 8x NVIDIA RTX PRO 6000 Blackwell Server Edition"
    label = axes.get_ylabel()
    assert "Δ output_throughput" in label and "% vs own baseline" in label and "tok/s" in label
    colours = [to_hex(c) for c in axes.collections[0].get_facecolors()]
    assert colours == [COLOURS["improved"], COLOURS["regressed"]]  # +9.1%, then -34.0%
    texts = [t.get_text() for t in axes.texts]
    assert texts == ["cg-128\n+9.1%, 89.5 tok/s", "eagle3\n-34.0%, 54.1 tok/s"]
    low, high = axes.get_ylim()
    assert low < -34.0 and high > 9.1
    zero = [line for line in axes.lines if list(line.get_ydata()) == [0.0, 0.0]]
    assert zero, "the zero line (each batch's own baseline) is drawn"
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    assert legend == ["improved", "regressed"]


def test_only_improvements_start_the_axis_at_zero_and_skip_the_confounded_run() -> None:
    rows, records = confounded_history()
    figure = trend_figure(experiment_best(rows, records, now=NOW, days=7), start=START, end=END)
    (axes,) = figure.axes
    assert axes.get_ylim()[0] == 0.0  # zero-based
    assert [t.get_text().split()[0] for t in axes.texts] == ["cg-128", "eagle3"]
    assert not any("3157" in t.get_text() or "tp" == t.get_text().split()[0]
                   for t in axes.texts)
    unchanged = [row("b-u", days_ago=1, results=[result("a", "unchanged", value=80.2,
                                                        delta_pct=0.3)])]
    figure = trend_figure(experiment_best(unchanged, {"b-u": [rec("b-u", "a", 80.2)]}, now=NOW,
                                     days=7), start=START, end=END)
    (axes,) = figure.axes
    assert [to_hex(c) for c in axes.collections[0].get_facecolors()] == [COLOURS["unchanged"]]


CHUNK_0 = "chunk@chunked-prefill-size=0"


def sweep_plan() -> BatchPlan:
    return make_plan(sweep=SweepPlan(name="chunk", extends=None,
                                     grid={"chunked-prefill-size": [0, 1]}, search="grid",
                                     budget=None, confirm_reps=3))


def test_one_point_per_experiment_a_busy_day_is_not_one_dot() -> None:
    # three experiments within one day, then a sweep and its confirmation (one experiment)
    rows = [row(f"b-{i}", days_ago=2 + i / 10, results=[
        result("cg-128", "improved", value=80.0 + i, delta_pct=float(1 + i))]) for i in range(3)]
    sweep = row("b-sweep", days_ago=1, plan=sweep_plan(), results=[
        result("eagle3", "improved", value=84.0, delta_pct=5.0),
        result(CHUNK_0, "improved", value=104.0, delta_pct=30.0)])  # its own draw: never
    confirm = row("b-confirm", days_ago=0.99, plan=make_plan(confirms="b-sweep"), results=[
        result(CHUNK_0, "improved", value=96.0, delta_pct=20.0)])
    rows += [sweep, confirm]
    records = {r.id: [rec(r.id, "baseline", 80.0)] for r in rows}
    (series,) = experiment_best(rows, records, now=NOW, days=7)
    assert [(p["batch"], p["approach"], p["delta_pct"]) for p in series["points"]] == [
        ("b-2", "cg-128", 3.0), ("b-1", "cg-128", 2.0), ("b-0", "cg-128", 1.0),
        ("b-sweep", CHUNK_0, 20.0)]  # the confirmed winner, at its sweep's start
    assert series["points"][-1]["judged_in"] == "b-confirm"
    assert len({p["day"] for p in series["points"][:3]}) == 1  # one day, three points
    figure = trend_figure([series], start=START, end=END)
    (axes,) = figure.axes
    assert list(axes.collections[0].get_offsets()[:, 0]) == [0, 1, 2, 3]
    assert [t.get_text() for t in axes.get_xticklabels()][-1] == "12-06\n09:00"
