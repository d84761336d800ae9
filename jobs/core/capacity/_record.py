"""A run's capacity as its record keeps it (docs/contracts.md "Capacity under the SLO"):
`"capacity": {"knob", "from", "max", "slo", "value", "binding", "above", "complete", "levels"}`,
made
by the engines from the levels they measured (`section`) and read back by the report, the
sweep and the charts (`capacity_of`).

`levels` are in the order they ran (the search's order, not sorted), each shaped as a `by_load`
entry (`load`, `metrics`, `status`, `warmup`, `repetitions`) plus `slo` ("met" / "violated";
null for a level that did not run to its end) and `broken` (each key over its limit: its
median). `above` is the lowest load that broke above the capacity (null when none did);
`complete` says the search ended by its own rule, not by its level budget or a failure.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobs.core.capacity._search import (
    KNOBS,
    Measured,
    Spec,
    binding_key,
    bounds,
    is_complete,
    measured,
)
from jobs.core.records import RunRecord


def _median(values: Any) -> float | None:
    found = [float(v) for v in (values if isinstance(values, list) else [values])
             if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)]
    return float(statistics.median(found)) if found else None


def searched(spec: Spec, entries: Sequence[Mapping[str, Any]],
             slo: Mapping[str, float]) -> list[Measured]:
    """The levels that ran to their end, as the search reads them, in the order they ran."""
    return [measured(entry["load"][spec.knob], entry.get("metrics") or {}, slo)
            for entry in entries if entry.get("status", "ok") == "ok"]


def section(spec: Spec, entries: Sequence[Mapping[str, Any]],
            slo: Mapping[str, float]) -> dict[str, Any]:
    """The record's `capacity` from the levels measured (`by_load`-shaped entries, in the order
    they ran)."""
    levels: list[dict[str, Any]] = []
    for entry in entries:
        level = dict(entry)
        if level.get("status", "ok") == "ok":
            metrics = level.get("metrics") or {}
            medians = {key: _median(metrics.get(key)) for key in slo}
            broken = {key: m for key, m in medians.items() if m is None or m > slo[key]}
            level["slo"] = "violated" if broken else "met"
            level["broken"] = broken
        else:
            level["slo"], level["broken"] = None, {}
        levels.append(level)
    found = searched(spec, entries, slo)
    low, high = bounds(found)
    ended = all(entry.get("status", "ok") == "ok" for entry in entries)
    return {**spec.to_dict(), "slo": {key: float(limit) for key, limit in slo.items()},
            "value": None if low is None else spec.as_load(low),
            "binding": binding_key(found),
            "above": None if high is None else spec.as_load(high),
            "complete": ended and is_complete(spec, found), "levels": levels}


@dataclass(frozen=True)
class Found:
    """A record's capacity, read back."""

    spec: Spec
    value: float | None
    binding: str | None
    above: float | None
    complete: bool
    levels: tuple[dict[str, Any], ...] = field(default=())
    slo: dict[str, float] = field(default_factory=dict)  # the limits it searched within

    @property
    def at_max(self) -> bool:
        """Nothing broke up to `max`: the capacity is at least the most the search tries."""
        return self.value is not None and self.above is None and self.value >= self.spec.max

    def level_at(self, value: float | None) -> dict[str, Any] | None:
        """The level measured at `value` (the capacity's own by default)."""
        if value is None:
            return None
        for level in self.levels:
            load = level.get("load") or {}
            if isinstance(load.get(self.spec.knob), int | float) \
                    and float(load[self.spec.knob]) == float(value):
                return level
        return None

    def median_at(self, key: str, value: float | None = None) -> float | None:
        """A key's median at the capacity (or at `value`): the goodput, for a throughput."""
        level = self.level_at(self.value if value is None else value)
        return None if level is None else _median((level.get("metrics") or {}).get(key))

    def broken_at(self, value: float | None) -> dict[str, float | None]:
        """What broke at a load (key -> median; None for a key not measured)."""
        level = self.level_at(value)
        broken = (level or {}).get("broken")
        return dict(broken) if isinstance(broken, dict) else {}


def capacity_of(record: RunRecord) -> Found | None:
    """A record's capacity; None for a run of a batch without `capacity` (or a record whose
    capacity is malformed: records are input)."""
    return read_capacity(record.extra.get("capacity"))


def closing_capacity(baseline: RunRecord) -> Found | None:
    """The capacity the baseline's closing run found (docs/contracts.md "Noise, measured": a
    bracketed batch measures its baseline again last); None without one."""
    bracket = baseline.extra.get("bracket")
    return read_capacity(bracket.get("capacity")) if isinstance(bracket, dict) else None


def read_capacity(raw: Any) -> Found | None:
    """A record's `capacity` object read back; None when it is not one."""
    if not isinstance(raw, dict) or raw.get("knob") not in KNOBS:
        return None
    try:
        spec = Spec.of(raw)
    except (KeyError, TypeError, ValueError):
        return None
    levels = raw.get("levels")
    value, above = _number(raw.get("value")), _number(raw.get("above"))
    given = raw.get("slo")
    limits: dict[Any, Any] = given if isinstance(given, dict) else {}
    return Found(spec=spec, value=None if value is None else spec.as_load(value),
                 slo={str(k): float(v) for k, v in limits.items() if _number(v) is not None},
                 binding=_text(raw.get("binding")),
                 above=None if above is None else spec.as_load(above),
                 complete=raw.get("complete") is True,
                 levels=tuple(lv for lv in (levels if isinstance(levels, list) else [])
                              if isinstance(lv, dict)))


def capacity_value(record: RunRecord) -> float | None:
    """A record's capacity (None without one, or when even `from` broke the SLO)."""
    found = capacity_of(record)
    return None if found is None else found.value


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
