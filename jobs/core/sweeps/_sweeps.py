"""Sweeps (docs/contracts.md "Sweeps and search"): a grid of knob values searched on top of the
baseline or of one approach, each point an approach named `NAME@K=V,K=V`.

`Sweep` is the preset's `sweep` key as written; `sweep_problems` lists what is wrong with one
(each with the key it concerns, for a one-line error), a grid over the size limit first, found
without building it. `SweepPlan` is the resolved sweep a worker runs: its grid, whose points
(`jobs.core.sweeps`) are made when asked for and never stored, and which one is the baseline
itself (it is not run twice). `sweep_section` is the report's `sweep` key. The search itself
(which point next) lives in `jobs.search`; this module is pure.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from jobs.core.deltas import change_pct, is_better
from jobs.core.limits import MAX_BUDGET, MAX_CONFIRM_REPS, bounded_name
from jobs.core.sweeps._grids import (
    GridPoints,
    Scalar,
    SweepPoint,
    grid_size,
    point_name,
    show_value,
)
from jobs.core.units import plural, with_unit

__all__ = ["ENV_KNOB", "FLAG_KNOB", "GridPoints", "Scalar", "Sweep", "SweepPlan", "SweepPoint",
           "point_name", "show_value", "sweep_problems", "to_sweep_plan"]

ENV_KNOB = re.compile(r"^[A-Z_][A-Z0-9_]*$")
FLAG_KNOB = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class Sweep(BaseModel):
    """The preset's `sweep` key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, BeforeValidator(bounded_name)] = Field(
        min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    extends: str | None = None
    grid: dict[str, tuple[Scalar, ...]]
    search: Literal["grid", "adaptive"] = "grid"
    budget: int | None = Field(default=None, ge=1, le=MAX_BUDGET)
    confirm_reps: int = Field(default=3, ge=1, le=MAX_CONFIRM_REPS)

    @property
    def size(self) -> int:
        return grid_size(self.grid)


def sweep_problems(
    sweep: Sweep, approaches: Sequence[str], *, max_points: int | None = None
) -> list[tuple[tuple[Any, ...], str]]:
    """(key path under the preset, message) for everything wrong with `sweep`. A grid of more
    than `max_points` points is that one problem alone: its size is a product, and nothing
    else is looked at (a million-point grid is refused in milliseconds)."""
    if max_points is not None and sweep.size > max_points:
        lengths = [str(len(values)) for values in sweep.grid.values()]
        shape = " x ".join(lengths) + " values" if len(lengths) <= 6 else f"{len(lengths)} knobs"
        return [(("sweep", "grid"),
                 f"sweep.grid has {sweep.size:,} points ({shape}); a sweep may hold at most "
                 f"{max_points:,} (SPECBENCH_MAX_POINTS)")]
    out: list[tuple[tuple[Any, ...], str]] = []
    if not sweep.grid:
        out.append((("sweep", "grid"), "sweep.grid is empty: name at least one knob"))
    for knob, values in sweep.grid.items():
        where = ("sweep", "grid", knob)
        if not (ENV_KNOB.match(knob) or FLAG_KNOB.match(knob)):
            out.append((where, f"sweep.grid knob {knob!r} is neither a server flag "
                               "(lower-case-with-dashes) nor an env variable (UPPER_CASE)"))
        if not values:
            out.append((where, f"sweep.grid.{knob} has no values"))
        for value in values:
            if isinstance(value, dict | list):
                out.append((where, f"sweep.grid.{knob}: values must be scalars"))
        shown = [show_value(v) for v in values]
        repeated = sorted(v for v, n in Counter(shown).items() if n > 1)
        if repeated:
            out.append((where, f"sweep.grid.{knob} repeats {', '.join(repeated)}"))
    if sweep.extends is not None and sweep.extends not in approaches:
        listing = ", ".join(approaches) or "none"
        out.append((("sweep", "extends"),
                    f"sweep.extends names no approach {sweep.extends!r}; approaches: {listing}"))
    if sweep.name in approaches or sweep.name == "baseline":
        out.append((("sweep", "name"), f"sweep.name {sweep.name!r} is an approach's name"))
    if sweep.search == "adaptive" and sweep.budget is None:
        out.append((("sweep", "search"), "sweep.search adaptive needs a budget (servers)"))
    if sweep.search == "grid" and sweep.budget is not None:
        out.append((("sweep", "budget"),
                    "sweep.budget applies to search: adaptive (a grid runs every point)"))
    if sweep.budget is not None and sweep.grid and sweep.budget > sweep.size:
        out.append((("sweep", "budget"),
                    f"sweep.budget {sweep.budget} is larger than the grid ({sweep.size} points)"))
    return out


@dataclass(frozen=True)
class SweepPlan:
    """A resolved sweep: plain data, JSON-safe, small. Its `points` are the grid's, made on
    demand (`GridPoints`), never stored; their configurations are the plan's `points`
    (jobs.core.sweeps)."""

    name: str
    extends: str | None
    grid: dict[str, list[Any]]
    search: str
    budget: int | None
    confirm_reps: int
    same_as_baseline: str | None = None  # the point that is the baseline itself: not run
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def points(self) -> GridPoints:
        """Every point, in grid order: a lazy sequence (`len` is the grid's size)."""
        return GridPoints(self.name, self.grid)

    @property
    def max_servers(self) -> int:
        """The most points that get a server."""
        runnable = len(self.points) - (1 if self.same_as_baseline else 0)
        return min(self.budget, runnable) if self.budget is not None else runnable

    def is_point(self, approach: str) -> bool:
        return self.points.find(approach) is not None

    def point(self, approach: str) -> SweepPoint:
        found = self.points.find(approach)
        if found is None:
            raise KeyError(approach)
        return found


def to_sweep_plan(data: Mapping[str, Any]) -> SweepPlan:
    """The inverse of `asdict`; a plan stored before points were lazy lists them: they are the
    grid's own, made again on demand."""
    fields = {k: v for k, v in data.items() if k != "points"}
    return SweepPlan(**fields)


def best_point(
    measured: Mapping[str, float | None], *, lower_is_better: bool
) -> tuple[str, float] | None:
    """The best measured point (name, value); ties go to the first measured."""
    best: tuple[str, float] | None = None
    for name, value in measured.items():
        if value is None or not math.isfinite(value):
            continue
        if best is None or is_better(value, best[1], lower_is_better=lower_is_better):
            best = (name, value)
    return best


def delta_pct(value: float | None, base: float | None, *, lower_is_better: bool) -> float | None:
    """The change against the baseline as the report gives it (positive: better, one decimal)."""
    if value is None or base is None:
        return None
    change = change_pct(value, base, lower_is_better=lower_is_better)
    return None if change is None else round(change, 1)


def sweep_section(
    sweep: SweepPlan,
    measured: Mapping[str, float | None],
    *,
    base_value: float | None,
    lower_is_better: bool,
    confirmation: Mapping[str, Any] | None,
    feasible: Callable[[str], bool] | None = None,
) -> dict[str, Any]:
    """The report's `sweep` key (docs/contracts.md): the grid's size, what was measured, the best
    point and the confirmation's verdict. `measured` counts the points that got a server; the best
    may be the baseline-equal point, measured by the baseline itself. Under an SLO, `feasible` says
    which points may be the best (jobs.core.levels: met at every level)."""
    values = dict(measured)
    if sweep.same_as_baseline is not None:
        values[sweep.same_as_baseline] = base_value
    if feasible is not None:
        values = {name: value for name, value in values.items() if feasible(name)}
    best = best_point(values, lower_is_better=lower_is_better)
    return {
        "name": sweep.name,
        "search": sweep.search,
        "points": len(sweep.points),
        "measured": len([n for n in measured
                         if n != sweep.same_as_baseline and sweep.is_point(n)]),
        "best": None if best is None else {
            "approach": best[0], "value": best[1],
            "delta_pct": delta_pct(best[1], base_value, lower_is_better=lower_is_better),
        },
        "confirmation": dict(confirmation) if confirmation is not None else None,
    }


def confirmed_steps(
    steps: list[dict[str, Any]],
    sweep: SweepPlan,
    confirmation: Mapping[str, Any] | None,
    *,
    metric: str,
    base_value: float | None,
    key: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The next steps with the sweep's points judged by the confirmation alone: no retry, adopt
    or accept of a point (a point is one draw of the search, not a verdict), but the confirmed
    winner adopted and accepted when it is the report's key achievement (`key`), with its knobs
    and the confirmed margin; a winner that did not hold up is named in the accept step, which
    keeps the best configuration measured otherwise (else the baseline). Ranks are renumbered."""
    confirmed = confirmation is not None and confirmation.get("verdict") == "improved"
    point = sweep.points.find(str(confirmation["approach"])) if confirmation is not None \
        else None
    knobs = "" if point is None else ", ".join(
        f"{k}={show_value(v)}" for k, v in point.values.items())
    winning = confirmed and point is not None and key is not None \
        and key.get("approach") == point.approach
    adopt = None
    if winning and confirmation is not None and point is not None:
        adopt = _step("adopt", point.approach,
                      action=f"Make {point.approach} the new baseline ({knobs})",
                      why=f"confirmed by batch {confirmation['batch']}: "
                          f"{confirmation['delta_pct']:+.1f}% on {metric}, "
                          f"{plural(sweep.confirm_reps, 'repetition')} each")
    out: list[dict[str, Any]] = []
    for step in steps:
        target = step.get("approach")
        if isinstance(target, str) and sweep.points.find(target) is not None \
                and step["kind"] in ("retry", "adopt", "accept"):
            continue
        if step["kind"] == "accept":
            continue  # made again below, after everything else
        if adopt is not None and step["kind"] != "retry":
            out.append(adopt)  # after the retries, before every other step
            adopt = None
        out.append(dict(step))
    if adopt is not None:  # every step left was a retry
        out.append(adopt)
    accept = next((s for s in steps if s["kind"] == "accept"), None)
    if winning and confirmation is not None and point is not None:
        shown = with_unit(f"{float(confirmation['value']):.4g}", metric)
        out.append(_step(
            "accept", point.approach,
            action=f"Keep {point.approach} ({shown} in its confirmation) until a next step "
                   "beats it",
            why=f"confirmed by batch {confirmation['batch']}: "
                f"{confirmation['delta_pct']:+.1f}% on {metric}"))
    elif accept is not None or base_value is not None:
        kept = accept if accept is not None and not sweep.points.find(
            str(accept.get("approach"))) else None
        if kept is None and base_value is not None:
            shown = with_unit(f"{base_value:.4g}", metric)
            kept = _step("accept", "baseline",
                                  action=f"Keep baseline ({shown}) until a next step beats it",
                                  why="the best configuration measured")
        if kept is not None:
            held = f"the sweep's best point ({knobs}) did not hold up in its confirmation"
            out.append({**kept, "why": f"{kept['why']}; {held}"} if point is not None
                       and not confirmed else dict(kept))
    for rank, step in enumerate(out, start=1):
        step["rank"] = rank
    return out


def _step(kind: str, approach: str, *, action: str, why: str) -> dict[str, Any]:
    """A next step of the report's shape (low effort: adopting or keeping a measured one)."""
    return {"rank": 0, "kind": kind, "approach": approach, "action": action, "why": why,
            "effort": "low"}
