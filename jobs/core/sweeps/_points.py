"""A sweep's points as configurations, made on demand (docs/contracts.md "Sweeps and search",
"Bounded work").

A point runs its parent's configuration (the baseline's, or the approach the sweep extends) with
the point's knob values: a flag layered on the server args (`false`/null removes it), an
UPPER_CASE knob set in the environment (null unsets it), the grid's knobs declared as its
change. `PointConfigs` is the plan's `points`: a sequence as long as the grid that builds a
configuration only when one is asked for, by position or by name, so a plan never holds the
grid's configurations and an adaptive sweep builds only those its search proposes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from jobs.core.configs import RunConfig, is_same_value, merge_args
from jobs.core.sweeps._grids import OnDemand, SweepPoint
from jobs.core.sweeps._sweeps import ENV_KNOB, SweepPlan


def point_config(point: SweepPoint, *, sweep: SweepPlan, parent: RunConfig) -> RunConfig:
    """The configuration of one point of `sweep` on top of `parent`."""
    flags = {k: v for k, v in point.values.items() if not ENV_KNOB.match(k)}
    envs = {k: v for k, v in point.values.items() if ENV_KNOB.match(k)}
    args = merge_args(parent.server_args, flags)
    env = dict(parent.env)
    for knob, value in envs.items():
        if value is None:
            env.pop(knob, None)
        else:
            env[knob] = str(value)
    change = {
        "server_args": {**parent.change["server_args"], **{k: args.get(k) for k in flags}},
        "env": {**parent.change["env"], **{k: env[k] for k in envs if k in env}},
    }
    shown = ", ".join(f"{k}={v}" for k, v in point.values.items())
    return RunConfig(
        approach=point.approach, role="approach", parent=sweep.extends,
        hypothesis=f"{shown} (sweep {sweep.name})", change=change, server_args=args, env=env,
    )


class PointConfigs(OnDemand[RunConfig]):
    """Every point's configuration, in grid order, each built when asked for."""

    def __init__(self, sweep: SweepPlan, parent: RunConfig) -> None:
        self.sweep, self.parent = sweep, parent

    def __len__(self) -> int:
        return len(self.sweep.points)

    def _made(self, position: int) -> RunConfig:
        return self._config(self.sweep.points[position])

    def __iter__(self) -> Iterator[RunConfig]:
        return (self._config(point) for point in self.sweep.points)

    def __contains__(self, item: object) -> bool:
        if isinstance(item, RunConfig):
            return self.find(item.approach) == item
        return False

    def find(self, approach: str) -> RunConfig | None:
        """The configuration of the point named `approach`, or None."""
        point = self.sweep.points.find(approach)
        return None if point is None else self._config(point)

    def _config(self, point: SweepPoint) -> RunConfig:
        return point_config(point, sweep=self.sweep, parent=self.parent)


def baseline_index(
    grid: Mapping[str, Sequence[Any]], *, base: RunConfig
) -> tuple[int, ...] | None:
    """The first point (in grid order) of a sweep on the baseline whose configuration is the
    baseline's own, or None. Knobs are independent, so each knob's first value that leaves the
    baseline as it is makes that point: found without building a point."""
    index: list[int] = []
    for knob, values in grid.items():
        env = ENV_KNOB.match(knob) is not None
        ours = base.env.get(knob) if env else base.server_args.get(knob)
        same = next((i for i, value in enumerate(values)
                     if is_same_value(_applied(value, env=env), ours)), None)
        if same is None:
            return None
        index.append(same)
    return tuple(index)


def _applied(value: Any, *, env: bool) -> Any:
    """What a knob reads once a point sets it to `value` (None: unset)."""
    if env:
        return None if value is None else str(value)
    return None if value is None or value is False else value
