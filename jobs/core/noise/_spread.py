"""One configuration's spread across batches (docs/contracts.md "Noise, measured").

A server started again, a neighbour on the host, a warm or cold GPU move a configuration by more
than one batch's repetitions show. So a change of the same configuration between batches (same
host, stack and benchmark) is judged against its spread across earlier batches: at least
`MIN_BATCHES` of them, their medians' min-max widened by each batch's own range. Within it the
change is "within its usual spread", never a regression; with fewer earlier batches it is
unconfirmed. Every figure says how many batches it rests on.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MIN_BATCHES = 3


@dataclass(frozen=True)
class Point:
    """One earlier batch's measurement of the configuration: its median and range."""

    batch: str
    value: float
    low: float
    high: float


@dataclass(frozen=True)
class Spread:
    """Where a configuration's medians fell across earlier batches."""

    points: tuple[Point, ...]

    @property
    def n(self) -> int:
        return len(self.points)

    @property
    def low(self) -> float:
        return min(min(p.low, p.value) for p in self.points)

    @property
    def high(self) -> float:
        return max(max(p.high, p.value) for p in self.points)

    @property
    def center(self) -> float:
        return float(statistics.median(p.value for p in self.points))

    @property
    def half_pct(self) -> float:
        """The spread's larger half, in % of its center: the "±x%" it is named by."""
        center = self.center
        if center == 0:
            return 0.0
        return max(self.high - center, center - self.low) / abs(center) * 100.0

    @property
    def width_pct(self) -> float:
        """Its whole width in % of its center: the noise figure a single repetition must beat."""
        center = self.center
        return 0.0 if center == 0 else (self.high - self.low) / abs(center) * 100.0

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high

    def words(self) -> str:
        return f"±{self.half_pct:.1f}% over {self.n} batches"


def spread_of(points: Sequence[Point]) -> Spread | None:
    """The spread of at least MIN_BATCHES earlier batches' measurements, else None."""
    return Spread(tuple(points)) if len(points) >= MIN_BATCHES else None


def judge_change(
    value: float, *, points: Sequence[Point], lower_is_better: bool, min_effect_pct: float
) -> dict[str, Any]:
    """A configuration's new median judged against its earlier batches: `state` is `within`
    (its usual spread, or a move below the minimum effect), `improved`, `regressed`, or
    `unconfirmed` (fewer than MIN_BATCHES earlier batches); `text` says so, naming how many
    batches it rests on; `delta_pct` is against the earlier medians' median."""
    n = len(points)
    spread = spread_of(points)
    if spread is None:
        noun = "batch" if n == 1 else "batches"
        return {"state": "unconfirmed", "n": n, "delta_pct": None, "spread_pct": None,
                "text": f"unconfirmed: {n} earlier {noun} on this host and stack, and a "
                        f"spread needs {MIN_BATCHES}"}
    center = spread.center
    raw = None if center == 0 else (value - center) / abs(center) * 100.0
    delta = None if raw is None else round(-raw if lower_is_better else raw, 1)
    found: dict[str, Any] = {"n": n, "delta_pct": delta, "spread_pct": round(spread.half_pct, 1),
                             "low": spread.low, "high": spread.high}
    if spread.holds(value) or delta is None:
        return {**found, "state": "within", "text": f"within its usual spread ({spread.words()})"}
    if abs(delta) < min_effect_pct:
        return {**found, "state": "within",
                "text": f"{delta:+.1f}%, outside its usual spread ({spread.words()}) but below "
                        f"the {min_effect_pct:g}% minimum effect"}
    state = "improved" if delta > 0 else "regressed"
    return {**found, "state": state,
            "text": f"{state} {delta:+.1f}% against its median over {n} batches, beyond its "
                    f"usual spread ({spread.words()})"}
