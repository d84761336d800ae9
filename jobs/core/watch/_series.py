"""A watch's series (docs/contracts.md "Regression watch"): one point per batch for each
configuration, load level and judged key: its median, its range, the batch, the time, the stack.

The judged keys are plain data (`JudgedKey`): the preset's metric, its SLO keys, the accept
length where a run measured one. Another kind of key (a capacity, a workload's figure) is one
more entry of `judged_keys` and, where a record holds it differently, one more branch of
`samples_of`.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobs.core.records import RunRecord

ACCEPT_LENGTH = "accept_length"


@dataclass(frozen=True)
class JudgedKey:
    """A key a series judges: its name and which way is better."""

    name: str
    lower_is_better: bool
    kind: str = "metric"  # "metric", "slo" or "accept_length"


@dataclass(frozen=True)
class SeriesKey:
    """What one series follows: a configuration, a key, a load level ('' without one)."""

    approach: str
    key: str
    load: str = ""

    def label(self) -> str:
        at = f" at {self.load}" if self.load else ""
        return f"{self.key} of {self.approach}{at}"


@dataclass(frozen=True)
class SeriesPoint:
    """One batch's measurement of one series."""

    key: SeriesKey
    batch: str
    at: dt.datetime
    value: float
    low: float
    high: float
    stack: Mapping[str, Any] = field(default_factory=dict)
    lower_is_better: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"batch": self.batch, "at": self.at.isoformat(), "value": self.value,
                "low": self.low, "high": self.high, "stack": dict(self.stack)}


def judged_keys(
    *, metric: str, lower_is_better: bool, slo: Iterable[str] = (),
) -> list[JudgedKey]:
    """The keys every batch of a watch is judged on: the metric, then each SLO key (latencies:
    lower is better), then the accept length (kept where a run measured it)."""
    keys = [JudgedKey(metric, lower_is_better)]
    keys += [JudgedKey(name, True, "slo") for name in slo if name != metric]
    keys.append(JudgedKey(ACCEPT_LENGTH, False, "accept_length"))
    return keys


def samples_of(record: RunRecord, key: JudgedKey) -> list[float]:
    """The key's values in one run (one level's view of it): one per repetition; the accept
    length is one figure per run."""
    if key.kind == "accept_length":
        value = record.accept_length
        return [] if value is None else [value]
    return record.samples(key.name)


def points_of(
    records: Sequence[RunRecord],
    *,
    keys: Sequence[JudgedKey],
    at: dt.datetime,
    stack_of: Callable[[RunRecord], Mapping[str, Any]],
    load_label: Callable[[Mapping[str, Any]], str],
) -> list[SeriesPoint]:
    """Every point one batch adds: each run that ended ok, at each of its load levels, for each
    key it measured. `stack_of` gives a run's stack (the store's side knows the host and the
    model's revision); `load_label` names a level."""
    points: list[SeriesPoint] = []
    for record in records:
        if record.status != "ok":
            continue
        levels = record.by_load
        views = [(record.at_level(i), load_label(level["load"]))
                 for i, level in enumerate(levels)] if levels else [(record, "")]
        stack = dict(stack_of(record))
        for view, load in views:
            if view.status != "ok":
                continue
            for key in keys:
                samples = samples_of(view, key)
                if not samples:
                    continue
                points.append(SeriesPoint(
                    key=SeriesKey(record.approach, key.name, load), batch=record.batch, at=at,
                    value=float(statistics.median(samples)), low=min(samples),
                    high=max(samples), stack=stack, lower_is_better=key.lower_is_better))
    return points
