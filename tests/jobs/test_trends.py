"""The digest's trend: each day's best judged delta per preset and hardware, and its chart,
checked from the figure's own objects (title, units, verdict colours, zero line and axis)."""

from __future__ import annotations

import datetime as dt

from matplotlib.colors import to_hex

from jobs.charts.trend import COLOURS, to_trend_png, trend_figure
from jobs.core.trends import daily_best
from tests.jobs.test_digest import NOW, confounded_history, rec, result, row, week

START, END = dt.date(2026, 11, 30), dt.date(2026, 12, 7)


def test_each_day_keeps_its_best_judged_delta_per_preset_and_hardware() -> None:
    rows, records = week()
    series = daily_best(rows, records, now=NOW, days=7)
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
    series = daily_best(rows, records, now=NOW, days=7, tz="Pacific/Honolulu")
    days = [p["day"] for s in series for p in s["points"]]
    assert "2026-12-05" in days and "2026-12-06" not in days


def test_the_trend_chart_is_a_png_and_none_without_data() -> None:
    rows, records = week()
    png = to_trend_png(daily_best(rows, records, now=NOW, days=7), start=START, end=END)
    assert png is not None and png.startswith(b"\x89PNG")
    assert to_trend_png([], start=START, end=END) is None
    assert to_trend_png(daily_best(rows, records, now=NOW, days=0.01), start=END,
                        end=END) is None


def test_the_chart_has_its_title_units_verdict_colours_and_a_zero_based_axis() -> None:
    rows, records = week()
    figure = trend_figure(daily_best(rows, records, now=NOW, days=7), start=START, end=END)
    assert "best judged Δ vs own baseline" in figure._suptitle.get_text()
    (axes,) = figure.axes
    assert axes.get_title() == "eagle3 on 8x NVIDIA RTX PRO 6000 Blackwell Server Edition"
    label = axes.get_ylabel()
    assert "Δ output_throughput" in label and "% vs own baseline" in label and "tok/s" in label
    colours = [to_hex(c) for c in axes.collections[0].get_facecolors()]
    assert colours == [COLOURS["improved"], COLOURS["regressed"]]  # +9.1%, then -34.0%
    texts = [t.get_text() for t in axes.texts]
    assert texts == ["cg-128 +9.1%, 89.5 tok/s", "eagle3 -34.0%, 54.1 tok/s"]
    low, high = axes.get_ylim()
    assert low < -34.0 and high > 9.1
    zero = [line for line in axes.lines if list(line.get_ydata()) == [0.0, 0.0]]
    assert zero, "the zero line (each batch's own baseline) is drawn"
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    assert legend == ["improved", "regressed"]


def test_only_improvements_start_the_axis_at_zero_and_skip_the_confounded_run() -> None:
    rows, records = confounded_history()
    figure = trend_figure(daily_best(rows, records, now=NOW, days=7), start=START, end=END)
    (axes,) = figure.axes
    assert axes.get_ylim()[0] == 0.0  # zero-based
    assert [t.get_text().split()[0] for t in axes.texts] == ["cg-128", "eagle3"]
    assert not any("3157" in t.get_text() or "tp" == t.get_text().split()[0]
                   for t in axes.texts)
    unchanged = [row("b-u", days_ago=1, results=[result("a", "unchanged", value=80.2,
                                                        delta_pct=0.3)])]
    figure = trend_figure(daily_best(unchanged, {"b-u": [rec("b-u", "a", 80.2)]}, now=NOW,
                                     days=7), start=START, end=END)
    (axes,) = figure.axes
    assert [to_hex(c) for c in axes.collections[0].get_facecolors()] == [COLOURS["unchanged"]]
