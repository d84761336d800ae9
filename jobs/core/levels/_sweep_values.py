"""What a sweep's recorded points measured: one value per point, and, under an SLO, whether the
point met it at every load level (docs/contracts.md "Sweeps and search", "Load levels and
service-level objectives").

**The value a sweep maximises** (or minimises, for a lower-is-better metric). Without load
levels it is the median of the batch's metric, as it always was. With load levels it is the
geometric mean, over the levels, of the metric's median at each level. The geometric mean's
ratio between two configurations is the geometric mean of their per-level ratios, so each level
weighs the same whatever its scale (the throughput at 64 concurrent requests does not drown the
one at 1), and `sweep.best.delta_pct` against the baseline's value, taken the same way, is the
point's mean relative change over the levels. A point with a level that measured nothing (or a
non-positive median) has no value: it counts as failed, as a point without a sample always has.
The report's per-result `value` stays the lowest level's (docs/contracts.md); only the sweep's
search, its best point and its winner use this value. With `metric: capacity` (docs/contracts.md
"Capacity under the SLO") a point's value is its capacity: the most load its server carried
within the SLO (none when even `from` broke it: a point without a value), maximised.

**Feasibility.** Under an SLO a point is feasible when it met the SLO at every level
(jobs.core.levels): every level ran and every SLO key's median is within its limit. The search
maximises the value among feasible points only (Optuna's constraints, jobs.search.propose), a
point that breaks the SLO is never the best, the winner or the bar a repetition must beat, and
without a feasible point there is no winner to confirm.

The worker searches and judges the sweep from `Points` (jobs.batches.sweeping), and the chat
thread draws its landscape from them too: one rule, here, so that the chart shows the values the
search and the report went by.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from jobs.core.capacity import CAPACITY, capacity_value
from jobs.core.levels._levels import loads_text
from jobs.core.levels._slo_check import level_runs, slo_breaches, slo_excess
from jobs.core.plans import BatchPlan
from jobs.core.records import RunRecord
from jobs.core.sweeps import best_point, delta_pct
from jobs.core.verdicts import median


def point_value(record: RunRecord, metric: str) -> float | None:
    """A run's value: its metric's median, or with load levels the geometric mean of the
    medians at every level; None when a level has no sample (or a median is not positive).
    A capacity is the record's own, one number (jobs.core.capacity)."""
    if metric == CAPACITY:
        return capacity_value(record)
    if not record.by_load:
        return median(record.samples(metric))
    medians = [median(run.samples(metric)) for _, run in level_runs(record)]
    if any(m is None or m <= 0 or not math.isfinite(m) for m in medians):
        return None
    found = [m for m in medians if m is not None]
    if len(found) == 1:
        return found[0]
    return math.exp(sum(math.log(m) for m in found) / len(found))


@dataclass
class Points:
    """A sweep's measurements so far: each point's value, and under an SLO its excess over the
    SLO (`slo_excess`: <= 0 met at every level, None unmeasured) and why it broke it; the same
    of the baseline, which is also the baseline-equal point's (it is not run twice), and of the
    preset's own approaches (a sweep's parent)."""

    plan: BatchPlan
    values: dict[str, float | None] = field(default_factory=dict)  # the points only
    excess: dict[str, float | None] = field(default_factory=dict)  # under an SLO only
    why: dict[str, str] = field(default_factory=dict)  # a point that breaks the SLO: the first
    others: dict[str, float | None] = field(default_factory=dict)  # baseline and approaches
    base_excess: float | None = None
    base_why: str = ""

    @classmethod
    def of(cls, plan: BatchPlan, records: Iterable[RunRecord]) -> Points:
        points = cls(plan)
        for record in records:
            points.add(record)
        return points

    def add(self, record: RunRecord) -> None:
        """Take in a run of the batch: a point, the baseline or an approach."""
        plan, name = self.plan, record.approach
        value = point_value(record, plan.metric)
        excess = slo_excess(record, plan.slo) if plan.slo else None
        broken = slo_breaches(record, plan.slo)
        why = broken[0].text if broken else ""
        if plan.sweep is not None and plan.sweep.is_point(name):
            self.values[name] = value
            if plan.slo:
                self.excess[name] = excess
                self.why[name] = why
            return
        self.others[name] = value
        if record.role == "baseline":
            self.base_excess, self.base_why = excess, why

    @property
    def base_value(self) -> float | None:
        return self.others.get(self.plan.baseline.approach)

    @property
    def base_feasible(self) -> bool:
        return not self.plan.slo or (self.base_excess is not None and self.base_excess <= 0)

    def known(self) -> tuple[dict[str, float | None], dict[str, float | None]]:
        """Every point's value and excess, the baseline-equal point given the baseline's."""
        values, excess = dict(self.values), dict(self.excess)
        same = None if self.plan.sweep is None else self.plan.sweep.same_as_baseline
        if same is not None and self.base_value is not None:
            values[same] = self.base_value
            if self.plan.slo:
                excess[same] = self.base_excess
        return values, excess

    def feasible(self, name: str) -> bool:
        """Whether a point met the SLO at every level (every measured point, without an SLO)."""
        if not self.plan.slo:
            return True
        same = None if self.plan.sweep is None else self.plan.sweep.same_as_baseline
        found = self.base_excess if name == same else self.excess.get(name)
        return found is not None and found <= 0

    def best(self, *, feasible: bool = True) -> tuple[str, float] | None:
        """The best point (name, value), among the feasible ones unless `feasible` is False;
        the baseline-equal point counts with the baseline's measurement."""
        values = self.known()[0]
        if feasible:
            values = {n: v for n, v in values.items() if self.feasible(n)}
        return best_point(values, lower_is_better=self.plan.lower_is_better)

    def breach(self, name: str) -> str:
        """Why a point is not feasible, in words ('' when it is)."""
        same = None if self.plan.sweep is None else self.plan.sweep.same_as_baseline
        if name == same:
            return self.base_why
        return self.why.get(name, "")


NO_FEASIBLE = "no measured point met the SLO at every level: nothing to confirm"


def slo_section(points: Points) -> dict[str, Any] | None:
    """The sweep report's `slo` key under an SLO (None without one): the limits, how many
    measured points met them at every level, the best point by value when it broke them (it is
    not the best: `excluded`, with why), and why there is no best when none met them."""
    plan, sweep = points.plan, points.plan.sweep
    if not plan.slo or sweep is None:
        return None
    measured = [n for n in points.values if n != sweep.same_as_baseline]
    top, best = points.best(feasible=False), points.best()
    excluded = None
    if top is not None and (best is None or top[0] != best[0]) and not points.feasible(top[0]):
        excluded = {"approach": top[0], "value": top[1],
                    "delta_pct": delta_pct(top[1], points.base_value,
                                           lower_is_better=plan.lower_is_better),
                    "why": points.breach(top[0])}
    return {"limits": dict(plan.slo),
            "feasible": len([n for n in measured if points.feasible(n)]),
            "excluded": excluded,
            "why": NO_FEASIBLE if best is None and top is not None else None}


def objective_text(plan: BatchPlan) -> str:
    """What a point's value is, in words: 'output_throughput' or, with load levels, 'geometric
    mean of output_throughput over max-concurrency 1, 4, 16 and 64'."""
    if plan.metric == CAPACITY and plan.capacity is not None:
        return (f"capacity: the most {plan.capacity['knob']} each point's server carries "
                "within the SLO")
    levels = [level for level in plan.levels if level]
    if len(levels) < 2:
        return plan.metric
    return f"geometric mean of {plan.metric} over {loads_text(levels)}"
