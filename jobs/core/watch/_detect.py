"""Change detection on one series (docs/contracts.md "Regression watch", "Detection").

The library places the change; calibrated tests decide it. Each night, on the key's current
segment (its points since the last confirmed change):

1. ruptures' exact penalised segmentation (`KernelCPD`, linear kernel: PELT with the l2 cost,
   in C; `min_size=1`, so that the newest point can be a segment of its own; the default moves
   such a change one night early), penalty `PENALTY` · σ̂², σ̂ the robust night-to-night noise
   of the whole series (the MAD of first differences: a step or a blip does not inflate it);
2. a one-point segment inside the history is a blip, not a change: such points are left out
   and the rest segmented again (they still count in the old segment's spread);
3. the newest segment's start is the change: at most `MAX_AGE` points old, after at least
   `MIN_OLD` points of the old segment, the series at least `MIN_POINTS` long, its newest point
   on the new side;
4. it is a candidate when its mean differs from the old segment's by `min_effect_pct` and by
   more than `t_crit` old-segment standard deviations scaled by √(1/age + 1/n₀)
   (`jobs.core.watch._thresholds`); the old segment's spread is pooled, in relative units, with
   the earlier segments' so that a young segment borrows the key's known noise.

The old segment is everything in the current segment before the change, not the part after
the library's previous break (that would pick the quietest stretch and halve the noise).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from jobs.core.watch._series import SeriesPoint
from jobs.core.watch._thresholds import thresholds

PENALTY = 4.0
MIN_POINTS = 5
MIN_OLD = 4
MAX_AGE = 12
MAD_TO_SD = 1.4826


@dataclass(frozen=True)
class Candidate:
    """A change the newest point may be: where it starts and what the old segment was."""

    since: str  # the batch where the new segment starts (its first bad batch)
    last_good: str  # the batch of the old segment's last point
    age: int  # points in the new segment, the newest included
    direction: int  # +1: the value went up; -1: down
    old_mean: float
    old_sd: float
    old_n: int
    old_low: float
    old_high: float
    new_mean: float
    effect_pct: float  # (new mean - old mean) / |old mean|, in %
    t_stat: float
    t_crit: float
    k_conf: float


@dataclass(frozen=True)
class Segments:
    """A series cut at its confirmed changes: the current segment and the pooled noise of the
    closed ones (sum of squared relative deviations from their own means, and its degrees of
    freedom)."""

    current: tuple[SeriesPoint, ...]
    prior_ss: float
    prior_df: int


def segments_of(points: Sequence[SeriesPoint], *, cuts: Collection[str]) -> Segments:
    """`points` (oldest first) cut where a confirmed change's new segment starts (`cuts`: those
    batches)."""
    starts = [0] + [i for i, p in enumerate(points) if p.batch in cuts and i > 0]
    prior_ss, prior_df = 0.0, 0
    for begin, end in zip(starts, starts[1:], strict=False):
        closed = [p.value for p in points[begin:end]]
        mean = sum(closed) / len(closed) if closed else 0.0
        if len(closed) >= 2 and mean != 0:
            prior_ss += sum(((v - mean) / mean) ** 2 for v in closed)
            prior_df += len(closed) - 1
    return Segments(current=tuple(points[starts[-1]:]), prior_ss=prior_ss, prior_df=prior_df)


def robust_sd(values: Sequence[float]) -> float:
    """The night-to-night noise from first differences (their MAD), blind to a step or a
    blip."""
    diffs = [b - a for a, b in zip(values, values[1:], strict=False)]
    if not diffs:
        return 0.0
    mid = _median(diffs)
    return MAD_TO_SD * _median([abs(d - mid) for d in diffs]) / math.sqrt(2.0)


def find_candidate(
    points: Sequence[SeriesPoint], *, cuts: Collection[str], min_effect_pct: float,
) -> Candidate | None:
    """The change the newest of `points` (one series, oldest first) may be, or None."""
    seg = segments_of(points, cuts=cuts)
    values = [p.value for p in seg.current]
    n = len(values)
    if n < MIN_POINTS:
        return None
    history = [p.value for p in points]
    noise = robust_sd(history if len(history) >= MIN_POINTS else values)
    if not noise > 0:
        noise = _sd(values) or 1e-12
    breaks = _breaks(values, PENALTY * noise * noise)
    if len(breaks) < 2:
        return None
    start = breaks[-2]
    age = n - start
    old, new = values[:start], values[start:]
    if age > MAX_AGE or len(old) < MIN_OLD:
        return None
    mean = sum(old) / len(old)
    if mean == 0:
        return None
    df = len(old) - 1 + seg.prior_df
    ss_rel = sum(((v - mean) / mean) ** 2 for v in old)
    sd = abs(mean) * math.sqrt((ss_rel + seg.prior_ss) / df)
    new_mean = sum(new) / len(new)
    direction = 1 if new_mean > mean else -1
    if (values[-1] - mean) * direction <= 0 or not sd > 0:  # the newest point went back
        return None
    effect = 100.0 * (new_mean - mean) / abs(mean)
    if abs(effect) < min_effect_pct:
        return None
    t_crit, k_conf = thresholds(old_n=len(old), age=age, df=df)
    t_stat = (new_mean - mean) / (sd * math.sqrt(1.0 / age + 1.0 / len(old)))
    if abs(t_stat) < t_crit:
        return None
    return Candidate(
        since=seg.current[start].batch, last_good=seg.current[start - 1].batch, age=age,
        direction=direction, old_mean=mean, old_sd=sd, old_n=len(old), old_low=min(old),
        old_high=max(old), new_mean=new_mean, effect_pct=effect, t_stat=t_stat,
        t_crit=t_crit, k_conf=k_conf)


def confirms(candidate: Candidate, value: float, *, min_effect_pct: float) -> bool:
    """Whether a confirmation's value lies on the new side: past the old mean, in the
    candidate's direction, by `min_effect_pct` and by `k_conf` old-segment deviations."""
    past = (value - candidate.old_mean) * candidate.direction
    floor = max(min_effect_pct / 100.0 * abs(candidate.old_mean),
                candidate.k_conf * candidate.old_sd)
    return past > 0 and past >= floor


def _breaks(values: list[float], penalty: float) -> list[int]:
    """The segments' ends (the last is len(values)), one-point segments inside the history
    left out as blips and the rest segmented again."""
    n = len(values)
    breaks = _segment(values, penalty)
    begins = [0, *breaks[:-1]]
    blips = {b for b, e in zip(begins, breaks, strict=True) if e - b == 1 and e != n}
    if not blips:
        return breaks
    kept = [i for i in range(n) if i not in blips]
    again = _segment([values[i] for i in kept], penalty)
    return [kept[b] if b < len(kept) else n for b in again]


def _segment(values: list[float], penalty: float) -> list[int]:
    if len(values) < 2:
        return [len(values)]
    import numpy as np
    import ruptures

    algo: Any = ruptures.KernelCPD(kernel="linear", min_size=1)
    found = algo.fit(np.asarray(values, dtype=float).reshape(-1, 1)).predict(pen=penalty)
    return [int(b) for b in found]  # the C code answers numpy int32s


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def _sd(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
