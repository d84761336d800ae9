"""The regression watch (issue 34): its false alerts, its delay, its cost, measured by the
watch's own code (`jobs.core.watch`: ruptures places a change, the calibrated t test decides a
candidate, its confirmation settles it; a confirmed change starts a new segment, a blip leaves
the night's point as measured).

Each simulated night is a batch of 3 repetitions, rep = level · (1 + 0.02·Z_night) ·
(1 + 0.005·Z_rep), its point the median; a candidate's confirmation is the same batch again
(a fresh Z_night). Figures:

- across 50 noise-only series of 60 nights, the share with any confirmed alert (target ≤ 2%;
  apache-otava's E-divisive at p = 0.001 alerts on 4–6.5% of such series);
- across 50 series with a 6% step at night 30, the median nights from the step to its alert,
  the step night counted as 1 and its confirmation included (target ≤ 2);
- the detection's time on a 1,000-point series.

The 50-series figures are one draw: a 2% target is one series in 50, so the bench also gives
the rate over `LARGE` series (its 95% interval), which is the figure to judge the target by.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import statistics
import time
from collections.abc import Callable

from jobs.core.watch import (
    CONFIRMED,
    SeriesKey,
    SeriesPoint,
    find_candidate,
    settle,
)

NIGHTS = 60
STEP_AT = 30  # the first night at the new level (0-based)
NIGHT_SD, REP_SD, REPS = 0.02, 0.005, 3
MIN_EFFECT_PCT = 2.0
SERIES = 50
LARGE = 1000
KEY = SeriesKey("baseline", "output_throughput")
T0 = dt.datetime(2027, 1, 1, 2, 0, tzinfo=dt.UTC)


def night(rng: random.Random, level: float) -> float:
    """One batch's median."""
    factor = 1 + NIGHT_SD * rng.gauss(0, 1)
    return statistics.median(level * factor * (1 + REP_SD * rng.gauss(0, 1))
                             for _ in range(REPS))


def watch(levels: list[float], rng: random.Random) -> list[tuple[int, str]]:
    """The nights (0-based) a candidate was settled on, and how: the watch's nightly loop."""
    series: list[SeriesPoint] = []
    cuts: set[str] = set()
    settled: list[tuple[int, str]] = []
    for i, level in enumerate(levels):
        series.append(SeriesPoint(key=KEY, batch=f"n{i}", at=T0 + dt.timedelta(days=i),
                                  value=night(rng, level), low=0.0, high=0.0))
        candidate = find_candidate(series, cuts=cuts, min_effect_pct=MIN_EFFECT_PCT)
        if candidate is None:
            continue
        again = SeriesPoint(key=KEY, batch=f"c{i}", at=series[-1].at,
                            value=night(rng, level), low=0.0, high=0.0)
        change = settle(candidate, series=series, confirmation=again, confirming_batch=f"c{i}",
                        min_effect_pct=MIN_EFFECT_PCT)
        settled.append((i, change.state))
        if change.state == CONFIRMED:
            cuts.add(candidate.since)
    return settled


def false_alert_share(count: int, seed: int) -> tuple[int, int]:
    rng = random.Random(seed)
    alerted = sum(any(s == CONFIRMED for _, s in watch([100.0] * NIGHTS, rng))
                  for _ in range(count))
    return alerted, count


def nights_to_alert(count: int, seed: int, step_pct: float = -6.0) -> list[int | None]:
    rng = random.Random(seed)
    levels = [100.0] * STEP_AT + [100.0 * (1 + step_pct / 100)] * (NIGHTS - STEP_AT)
    out: list[int | None] = []
    for _ in range(count):
        alerts = [i for i, s in watch(levels, rng) if s == CONFIRMED and i >= STEP_AT]
        out.append(alerts[0] - STEP_AT + 1 if alerts else None)
    return out


def detection_ms(points: int = 1000, repeat: int = 30) -> tuple[float, float]:
    """Median and worst ms of one night's detection on a `points`-long series with a 6% step
    at a random night and a newest point 8% low (the whole path: segmentation, thresholds)."""
    rng = random.Random(7)
    times: list[float] = []
    for r in range(repeat):
        step = rng.randrange(100, points - 100)
        values = [100.0 * (0.94 if i >= step else 1.0) * (1 + NIGHT_SD * rng.gauss(0, 1))
                  for i in range(points)]
        values[-1] = values[-2] * (0.92 if r % 2 else 1.0)
        series = [SeriesPoint(key=KEY, batch=f"n{i}", at=T0, value=v, low=v, high=v)
                  for i, v in enumerate(values)]
        began = time.perf_counter()
        find_candidate(series, cuts=set(), min_effect_pct=MIN_EFFECT_PCT)
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), max(times)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def _share(found: tuple[int, int]) -> str:
    k, n = found
    low, high = wilson(k, n)
    return f"{k / n:.1%} ({k}/{n}; 95% CI {low:.1%}–{high:.1%})"


def _median(delays: list[int | None]) -> str:
    got = [d for d in delays if d is not None]
    by2 = sum(1 for d in got if d <= 2) / len(delays)
    missed = len(delays) - len(got)
    return (f"{statistics.median(got):g} (by night 1: {sum(d <= 1 for d in got) / len(delays):.0%},"
            f" by night 2: {by2:.0%}, never: {missed})" if got else "never alerted")


def run(large: int = LARGE, timed: Callable[[], tuple[float, float]] = detection_ms,
        ) -> dict[str, str]:
    noise = false_alert_share(SERIES, seed=20340)
    step = nights_to_alert(SERIES, seed=20341)
    median_ms, worst_ms = timed()
    return {
        f"noise-only series with an alert ({SERIES} x {NIGHTS} nights, 2%)": _share(noise),
        f"same, {large} series (the rate to judge the 2% target by)":
            _share(false_alert_share(large, seed=1)),
        f"median nights from a 6% step to its alert ({SERIES} series)": _median(step),
        f"same, {large // 5} series": _median(nights_to_alert(large // 5, seed=2)),
        "10% step: median nights to its alert (50 series)":
            _median(nights_to_alert(SERIES, seed=3, step_pct=-10.0)),
        "detection on a 1,000-point series (median / worst ms)":
            f"{median_ms:.1f} / {worst_ms:.1f}",
    }


if __name__ == "__main__":
    for name, value in run().items():
        print(f"{name}: {value}")
