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

from jobs.core.sweeps import SweepPlan, SweepPoint

STARTUP_POINTS = 3  # points the sampler places before its model guides it
ASK_TRIES = 8  # proposals of already measured points tolerated before the nearest free one


def servers_used(sweep: SweepPlan, measured: Mapping[str, float | None]) -> int:
    """The sweep's points that got a server (the baseline-equal point is the baseline's)."""
    names = {p.approach for p in sweep.points}
    return len([n for n in measured if n in names and n != sweep.same_as_baseline])


def next_point(
    sweep: SweepPlan,
    measured: Mapping[str, float | None],
    *,
    lower_is_better: bool,
    batch: str = "",
) -> str | None:
    """The next point's approach name, or None when the sweep is done.

    `measured`: point name -> its value (the median of the metric), None when it has no sample.
    The baseline-equal point may be given the baseline's value: it is never proposed."""
    free = [p for p in sweep.points
            if p.approach not in measured and p.approach != sweep.same_as_baseline]
    if not free or servers_used(sweep, measured) >= sweep.max_servers:
        return None
    if sweep.search == "grid":
        return free[0].approach
    return _adaptive(sweep, measured, free, lower_is_better=lower_is_better,
                     seed=zlib.crc32(f"{batch}:{len(measured)}".encode()))


def _adaptive(
    sweep: SweepPlan,
    measured: Mapping[str, float | None],
    free: list[SweepPoint],
    *,
    lower_is_better: bool,
    seed: int,
) -> str:
    import optuna
    from optuna.distributions import IntDistribution
    from optuna.samplers import GPSampler

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    logging.getLogger("optuna").setLevel(logging.ERROR)
    knobs = list(sweep.grid)
    spaces: dict[str, Any] = {k: IntDistribution(0, len(sweep.grid[k]) - 1) for k in knobs}
    by_index = {p.index: p for p in sweep.points}
    values = {n: v for n, v in measured.items() if v is not None and math.isfinite(v)}
    worst = (max if lower_is_better else min)(values.values()) if values else 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Optuna's experimental-feature warnings
        study = optuna.create_study(
            direction="minimize" if lower_is_better else "maximize",
            sampler=GPSampler(seed=seed, n_startup_trials=STARTUP_POINTS),
        )
        known: dict[tuple[int, ...], float] = {}
        for point in sweep.points:
            if point.approach not in measured:
                continue
            value = values.get(point.approach, worst)
            known[point.index] = value
            study.add_trial(optuna.trial.create_trial(
                params=dict(zip(knobs, point.index, strict=True)), distributions=spaces,
                value=value,
            ))
        proposal: tuple[int, ...] = ()
        for _ in range(ASK_TRIES):
            trial = study.ask(spaces)
            proposal = tuple(int(trial.params[k]) for k in knobs)
            chosen = by_index.get(proposal)
            if chosen is not None and chosen in free:
                return chosen.approach
            study.tell(trial, known.get(proposal, worst))
    return _nearest(proposal, free).approach


def _nearest(index: tuple[int, ...], free: list[SweepPoint]) -> SweepPoint:
    """The free point closest to `index` in grid steps (the first, on a tie)."""
    if not index:
        return free[0]
    return min(free, key=lambda p: sum(abs(a - b) for a, b in zip(p.index, index, strict=True)))
