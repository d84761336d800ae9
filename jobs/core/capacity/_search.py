"""The capacity search (docs/contracts.md "Capacity under the SLO"): which load to measure next
on one started server, from the levels measured so far, and what they found.

From `from` the load doubles while every SLO key holds (each key's median over the level's
repetitions within its limit); once a level breaks, the search bisects between the last load
that held and the first that broke until the two are within its precision: 2% of the load that
held or one unit (1 request; 0.1 req/s), whichever is coarser. Never above `max`, never more
than `MAX_LEVELS` levels. The capacity is the largest load that held (None when even `from`
broke); the binding key is the one that broke at the lowest load that broke above it (of two
that broke there, the one furthest over its limit).

Pure: the engines measure the levels this proposes, nothing here runs anything.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobs.core.records import CAPACITY as CAPACITY  # what a sweep maximises: `metric: capacity`

KNOBS = ("max-concurrency", "request-rate")
SHOWN = "output_throughput"
"""What a pass's progress shows while a batch searches `metric: capacity` (no pass measures a
capacity: every engine's bench reports this throughput)."""


def shown_metric(metric: str) -> str:
    """The figure a bench pass's progress shows for a batch judged by `metric`."""
    return SHOWN if metric == CAPACITY else metric


UNITS = {"max-concurrency": 1.0, "request-rate": 0.1}
"""The smallest step of each knob: one request; a tenth of a request a second."""
PRECISION_PCT = 2.0
MAX_LEVELS = 16


@dataclass(frozen=True)
class Spec:
    """A preset's `capacity`: the load knob, the first load and the most it may reach."""

    knob: str
    start: float
    max: float

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> Spec:
        """From the plan's dict ({"knob", "from", "max"})."""
        return cls(knob=str(raw["knob"]), start=float(raw["from"]), max=float(raw["max"]))

    def to_dict(self) -> dict[str, Any]:
        return {"knob": self.knob, "from": self.as_load(self.start),
                "max": self.as_load(self.max)}

    @property
    def unit(self) -> float:
        return UNITS[self.knob]

    def as_load(self, value: float) -> int | float:
        """A load as the bench takes it: a whole number of requests, a rate to 0.1."""
        if self.knob == "max-concurrency":
            return int(round(value))
        return round(value, 1)

    def load(self, value: float) -> dict[str, Any]:
        """The bench setting at `value`: {"max-concurrency": 8}."""
        return {self.knob: self.as_load(value)}

    def precision(self, held: float) -> float:
        """How close the last load that held and the first that broke must come: 2% of the
        load that held or one unit, whichever is coarser."""
        return max(self.unit, held * PRECISION_PCT / 100.0)


@dataclass(frozen=True)
class Measured:
    """One level of the search: its load, whether it held, and each broken key's median over
    its limit (a key not measured counts as broken, with an infinite excess)."""

    load: float
    holds: bool
    broken: tuple[tuple[str, float], ...] = ()


def level_state(metrics: Mapping[str, Any], slo: Mapping[str, float]
                ) -> tuple[bool, dict[str, float]]:
    """Whether a level's figures hold the SLO, and the ratio median / limit of each key that
    breaks it (inf for a key with no sample). `metrics`: a record's shape, a list per key."""
    broken: dict[str, float] = {}
    for key, limit in slo.items():
        values = metrics.get(key)
        samples = [float(v) for v in (values if isinstance(values, list) else [values])
                   if isinstance(v, int | float) and not isinstance(v, bool)
                   and math.isfinite(v)]
        if not samples:
            broken[key] = math.inf
            continue
        found = float(statistics.median(samples))
        if found > float(limit):
            broken[key] = found / float(limit) if limit > 0 else math.inf
    return not broken, broken


def measured(load: float, metrics: Mapping[str, Any], slo: Mapping[str, float]) -> Measured:
    """A measured level as the search reads it."""
    holds, broken = level_state(metrics, slo)
    return Measured(float(load), holds, tuple(broken.items()))


def bounds(levels: Sequence[Measured]) -> tuple[float | None, float | None]:
    """(the largest load that held, the lowest load that broke above it); None for either
    the search has not found."""
    held = [lv.load for lv in levels if lv.holds]
    low = max(held) if held else None
    broke = [lv.load for lv in levels if not lv.holds and (low is None or lv.load > low)]
    return low, (min(broke) if broke else None)


def next_load(spec: Spec, levels: Sequence[Measured]) -> float | None:
    """The load to measure next, or None when the search is done."""
    if not levels:
        return float(spec.as_load(spec.start))
    if len(levels) >= MAX_LEVELS:
        return None
    low, high = bounds(levels)
    if low is None:
        return None  # even `from` broke
    if high is None:  # still doubling
        if low >= spec.max:
            return None
        return float(spec.as_load(min(low * 2.0, spec.max)))
    if high - low <= spec.precision(low) + 1e-9:
        return None
    middle = spec.as_load((low + high) / 2.0)
    if not low < middle < high:
        return None
    return float(middle)


def binding_key(levels: Sequence[Measured]) -> str | None:
    """The key that broke at the lowest load that broke above the capacity (of several, the
    one furthest over its limit); None when nothing broke above it."""
    low, high = bounds(levels)
    if high is None:
        return None
    at = next(lv for lv in levels if lv.load == high and not lv.holds)
    if not at.broken:
        return None
    return max(at.broken, key=lambda kv: kv[1])[0]


def is_complete(spec: Spec, levels: Sequence[Measured]) -> bool:
    """Whether the search ended by its own rule (not by the level budget)."""
    return next_load(spec, levels) is None and not (
        len(levels) >= MAX_LEVELS and _open(spec, levels))


def _open(spec: Spec, levels: Sequence[Measured]) -> bool:
    """Whether one more level would still have narrowed the search."""
    low, high = bounds(levels)
    if low is None:
        return False
    if high is None:
        return low < spec.max
    return high - low > spec.precision(low) + 1e-9
