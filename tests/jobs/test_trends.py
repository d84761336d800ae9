"""The digest's trend: each day's best value per preset and hardware, and its chart."""

from __future__ import annotations

import datetime as dt

from jobs.charts.trend import to_trend_png
from jobs.core.trends import daily_best
from tests.jobs.test_digest import NOW, week


def test_each_day_keeps_its_best_value_per_preset_and_hardware() -> None:
    rows, records = week()
    series = daily_best(rows, records, now=NOW, days=7)
    by_key = {(s["preset"], s["hardware"]): s for s in series}
    rtx = by_key[("eagle3", "8x NVIDIA RTX PRO 6000 Blackwell Server Edition")]
    # b-old (20 days ago) is outside the window; the failed record never counts
    assert [(p["day"], p["approach"], p["value"]) for p in rtx["points"]] == [
        ("2026-12-04", "cg-128", 89.5), ("2026-12-06", "baseline", 81.0)]
    assert rtx["metric"] == "output_throughput" and rtx["lower_is_better"] is False
    h200 = by_key[("eagle3", "1x H200")]
    assert [(p["day"], p["value"]) for p in h200["points"]] == [("2026-12-06", 120.0)]


def test_days_follow_the_configured_time_zone() -> None:
    rows, records = week()
    # b-2 was created at 09:00 UTC on Dec 6, which is still Dec 5 in Honolulu (UTC-10)
    series = daily_best(rows, records, now=NOW, days=7, tz="Pacific/Honolulu")
    days = [p["day"] for s in series for p in s["points"]]
    assert "2026-12-05" in days and "2026-12-06" not in days


def test_the_trend_chart_is_a_png_and_none_without_data() -> None:
    rows, records = week()
    start, end = dt.date(2026, 11, 30), dt.date(2026, 12, 7)
    png = to_trend_png(daily_best(rows, records, now=NOW, days=7), start=start, end=end)
    assert png is not None and png.startswith(b"\x89PNG")
    assert to_trend_png([], start=start, end=end) is None
    assert to_trend_png(daily_best(rows, records, now=NOW, days=0.01), start=end,
                        end=end) is None
