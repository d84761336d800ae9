"""The next point of a sweep, from the results stored so far (docs/contracts.md "Sweeps and
search").

`search: grid` runs every point in grid order. `search: adaptive` asks Optuna's Gaussian-process
sampler, which models the metric over the grid's knobs (each knob as the index of its value,
so that neighbouring values are near) and is guided by that model from the fourth point on
(Optuna's default TPE samples at random for its first ten trials). Nothing is kept between
proposals but the store's records: the study is rebuilt from the measured points each time, with a
seed drawn from the batch and the number of points measured, so a worker that resumes a sweep
proposes what its predecessor would have.

A point that failed (no sample) is told to the model as the worst value measured so far, so the
search steers away from a region that does not start instead of ignoring it.

Under an SLO (docs/contracts.md "Load levels and service-level objectives") each trial carries one
constraint, Optuna's own (feasible when <= 0): the point's excess over the SLO
(jobs.core.levels.slo_excess, the largest `median / limit - 1` over every level and key), kept
as the trial's user attribute `slo_excess` and read by the sampler's `constraints_func`. The
sampler then models where the SLO holds and proposes where the value is high *and* the SLO is
likely met; the value it is told is the point's own, never penalised. A point with an unmeasured
level (or no sample) is told the largest excess measured, at least UNMEASURED_EXCESS. Trials
given from the store are built with their constraint already recorded (the key Optuna's
`constraints_func` writes), so the model sees it for every past point.
"""

from __future__ import annotations

import contextlib
import logging
import math
import warnings
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

from jobs.core.sweeps import GridPoints, SweepPlan

STARTUP_POINTS = 3  # points the sampler places before its model guides it
ASK_TRIES = 8  # proposals of already measured points tolerated before the nearest free one
EXCESS_ATTR = "slo_excess"  # a trial's user attribute: its constraint (<= 0: SLO met)
CONSTRAINTS_KEY = "constraints"  # where Optuna keeps what `constraints_func` returned
UNMEASURED_EXCESS = 1.0  # at least: a point unmeasured at a level is told twice a limit


def servers_used(sweep: SweepPlan, measured: Mapping[str, float | None]) -> int:
    """The sweep's points that got a server (the baseline-equal point is the baseline's)."""
    return len([n for n in measured if n != sweep.same_as_baseline and sweep.is_point(n)])


def next_point(
    sweep: SweepPlan,
    measured: Mapping[str, float | None],
    *,
    lower_is_better: bool,
    batch: str = "",
    excess: Mapping[str, float | None] | None = None,
) -> str | None:
    """The next point's approach name, or None when the sweep is done.

    `measured`: point name -> its value (jobs.core.levels), None when it has none.
    `excess`, under an SLO: point name -> its excess over the SLO (<= 0: met at every level;
    None: unmeasured), the adaptive search's constraint.
    The baseline-equal point may be given the baseline's value: it is never proposed. Only the
    measured points and the proposed one are built: the grid is never listed (docs/contracts.md
    "Bounded work"), and a grid search walks it in order up to its first free point."""
    if servers_used(sweep, measured) >= sweep.max_servers:
        return None
    taken = {p.index for n in measured if (p := sweep.points.find(n)) is not None}
    if sweep.same_as_baseline is not None:
        taken.add(sweep.point(sweep.same_as_baseline).index)
    if sweep.search == "grid":
        index = next(i for i in sweep.points.indices() if i not in taken)
        return sweep.points.at(index).approach
    return _adaptive(sweep, measured, taken, lower_is_better=lower_is_better,
                     seed=zlib.crc32(f"{batch}:{len(measured)}".encode()), excess=excess)


def _adaptive(
    sweep: SweepPlan,
    measured: Mapping[str, float | None],
    taken: set[tuple[int, ...]],
    *,
    lower_is_better: bool,
    seed: int,
    excess: Mapping[str, float | None] | None = None,
) -> str:
    """Optuna's proposal over the grid's per-knob choices (each knob an integer index)."""
    grid = sweep.points
    knobs = grid.knobs
    with warnings.catch_warnings(), _one_thread():
        warnings.simplefilter("ignore")  # Optuna's experimental and deprecation warnings
        study, spaces, told = study_of(sweep, measured, lower_is_better=lower_is_better,
                                       seed=seed, excess=excess)
        worst = told[None]
        proposal: tuple[int, ...] = ()
        for _ in range(ASK_TRIES):
            trial = study.ask(spaces)
            proposal = tuple(int(trial.params[k]) for k in knobs)
            if grid.is_index(proposal) and proposal not in taken:
                return grid.at(proposal).approach
            value, over = told.get(proposal, worst)
            if excess is not None:
                trial.set_user_attr(EXCESS_ATTR, over)
            study.tell(trial, value)
    return grid.at(_nearest(proposal, grid, taken)).approach


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """The Gaussian process fits a dozen points: on one torch thread, not one per core (on 2
    busy cores the threads spent most of a fit waiting on each other, ~4x slower). Restored
    after, for whatever else this process runs."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


Told = dict[tuple[int, ...] | None, tuple[float, float]]  # index (None: the worst) -> told


def study_of(
    sweep: SweepPlan,
    measured: Mapping[str, float | None],
    *,
    lower_is_better: bool,
    seed: int,
    excess: Mapping[str, float | None] | None = None,
) -> tuple[Any, dict[str, Any], Told]:
    """The Optuna study of the measured points, in grid order, as the model is told them: each
    point's value (a failed one the worst), and under an SLO its constraint. Returns the study,
    its search space and what each index was told (`None`: what an unmeasured point is)."""
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
    overs = [e for e in (excess or {}).values() if e is not None and math.isfinite(e)]
    unmeasured = max([UNMEASURED_EXCESS, *overs])
    told: Told = {None: (worst, unmeasured)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constraints_func: deprecated in 5.0, kept until 7.0
        study = optuna.create_study(
            direction="minimize" if lower_is_better else "maximize",
            sampler=GPSampler(seed=seed, n_startup_trials=STARTUP_POINTS,
                              constraints_func=None if excess is None else _constraint),
        )
    found = (grid.find(name) for name in measured)
    for point in sorted((p for p in found if p is not None), key=lambda p: p.index):
        over = (excess or {}).get(point.approach)
        told[point.index] = (values.get(point.approach, worst),
                             unmeasured if over is None or not math.isfinite(over) else over)
        value, over = told[point.index]
        attrs: dict[str, Any] = {} if excess is None else {
            "user_attrs": {EXCESS_ATTR: over}, "system_attrs": {CONSTRAINTS_KEY: (over,)}}
        study.add_trial(optuna.trial.create_trial(
            params=dict(zip(knobs, point.index, strict=True)), distributions=spaces,
            value=value, **attrs,
        ))
    return study, spaces, told


def _constraint(trial: Any) -> tuple[float]:
    """Optuna's constraint of a trial: its excess over the SLO (<= 0: met at every level)."""
    return (float(trial.user_attrs[EXCESS_ATTR]),)


def _nearest(index: tuple[int, ...], grid: GridPoints, taken: set[tuple[int, ...]]
             ) -> tuple[int, ...]:
    """The free point closest to `index` in grid steps (the first in grid order, on a tie),
    found by walking the grid's indices without building a point."""
    free = (i for i in grid.indices() if i not in taken)
    if not index:
        return next(free)
    return min(free, key=lambda i: sum(abs(a - b) for a, b in zip(i, index, strict=True)))
