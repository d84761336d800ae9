"""The next point of a sweep, from the results stored so far (SPEC.md "Sweeps and search").

`search: grid` runs every point in grid order. `search: adaptive` asks Optuna's Gaussian-process
sampler, which models the metric over the grid's knobs (each knob as the index of its value,
so that neighbouring values are near) and is guided by that model from the fourth point on
(Optuna's default TPE samples at random for its first ten trials). Nothing is kept between
proposals but the store's records: the study is rebuilt from the measured points each time, with a
seed drawn from the batch and the number of points measured, so a worker that resumes a sweep
proposes what its predecessor would have.

A point that failed (no sample) is told to the model as the worst value measured so far, so the
search steers away from a region that does not start instead of ignoring it.
"""

from __future__ import annotations

import logging
import math
import warnings
import zlib
from collections.abc import Mapping
from typing import Any

from jobs.core.grids import GridPoints
from jobs.core.sweeps import SweepPlan

STARTUP_POINTS = 3  # points the sampler places before its model guides it
ASK_TRIES = 8  # proposals of already measured points tolerated before the nearest free one


def servers_used(sweep: SweepPlan, measured: Mapping[str, float | None]) -> int:
    """The sweep's points that got a server (the baseline-equal point is the baseline's)."""
    return len([n for n in measured if n != sweep.same_as_baseline and sweep.is_point(n)])


def next_point(
    sweep: SweepPlan,
    measured: Mapping[str, float | None],
    *,
    lower_is_better: bool,
    batch: str = "",
) -> str | None:
    """The next point's approach name, or None when the sweep is done.

    `measured`: point name -> its value (the median of the metric), None when it has no sample.
    The baseline-equal point may be given the baseline's value: it is never proposed. Only the
    measured points and the proposed one are built: the grid is never listed (SPEC.md "Bounded
    work"), and a grid search walks it in order up to its first free point."""
    if servers_used(sweep, measured) >= sweep.max_servers:
        return None
    taken = {p.index for n in measured if (p := sweep.points.find(n)) is not None}
    if sweep.same_as_baseline is not None:
        taken.add(sweep.point(sweep.same_as_baseline).index)
    if sweep.search == "grid":
        index = next(i for i in sweep.points.indices() if i not in taken)
        return sweep.points.at(index).approach
    return _adaptive(sweep, measured, taken, lower_is_better=lower_is_better,
                     seed=zlib.crc32(f"{batch}:{len(measured)}".encode()))


def _adaptive(
    sweep: SweepPlan,
    measured: Mapping[str, float | None],
    taken: set[tuple[int, ...]],
    *,
    lower_is_better: bool,
    seed: int,
) -> str:
    """Optuna's proposal over the grid's per-knob choices (each knob an integer index)."""
    import optuna
    from optuna.distributions import IntDistribution
    from optuna.samplers import GPSampler

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    logging.getLogger("optuna").setLevel(logging.ERROR)
    grid = sweep.points
    knobs = grid.knobs
    spaces: dict[str, Any] = {k: IntDistribution(0, r - 1) for k, r in zip(knobs, grid.radices,
                                                                           strict=True)}
    values = {n: v for n, v in measured.items() if v is not None and math.isfinite(v)}
    worst = (max if lower_is_better else min)(values.values()) if values else 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Optuna's experimental-feature warnings
        study = optuna.create_study(
            direction="minimize" if lower_is_better else "maximize",
            sampler=GPSampler(seed=seed, n_startup_trials=STARTUP_POINTS),
        )
        known: dict[tuple[int, ...], float] = {}
        found = (grid.find(name) for name in measured)
        for point in sorted((p for p in found if p is not None), key=lambda p: p.index):
            value = values.get(point.approach, worst)  # in grid order, as the model was told
            known[point.index] = value
            study.add_trial(optuna.trial.create_trial(
                params=dict(zip(knobs, point.index, strict=True)), distributions=spaces,
                value=value,
            ))
        proposal: tuple[int, ...] = ()
        for _ in range(ASK_TRIES):
            trial = study.ask(spaces)
            proposal = tuple(int(trial.params[k]) for k in knobs)
            if grid.is_index(proposal) and proposal not in taken:
                return grid.at(proposal).approach
            study.tell(trial, known.get(proposal, worst))
    return grid.at(_nearest(proposal, grid, taken)).approach


def _nearest(index: tuple[int, ...], grid: GridPoints, taken: set[tuple[int, ...]]
             ) -> tuple[int, ...]:
    """The free point closest to `index` in grid steps (the first in grid order, on a tie),
    found by walking the grid's indices without building a point."""
    free = (i for i in grid.indices() if i not in taken)
    if not index:
        return next(free)
    return min(free, key=lambda i: sum(abs(a - b) for a, b in zip(i, index, strict=True)))
