"""Sweeps (docs/contracts.md "Sweeps and search"): a preset's `sweep` and the plan's
(`_sweeps`), its grid and its points' names (`_grids`), each point's configuration made when asked
for (`_points`), and the best point against the approach it extends (`_sweep_parents`)."""

from jobs.core.sweeps._grids import (
    GridPoints,
    point_name,
)
from jobs.core.sweeps._points import (
    PointConfigs,
    baseline_index,
)
from jobs.core.sweeps._sweep_parents import (
    vs_parent,
)
from jobs.core.sweeps._sweeps import (
    ENV_KNOB,
    Sweep,
    SweepPlan,
    best_point,
    confirmed_steps,
    delta_pct,
    show_value,
    sweep_problems,
    sweep_section,
    to_sweep_plan,
)

__all__ = [
    "ENV_KNOB",
    "GridPoints",
    "PointConfigs",
    "Sweep",
    "SweepPlan",
    "baseline_index",
    "best_point",
    "confirmed_steps",
    "delta_pct",
    "point_name",
    "show_value",
    "sweep_problems",
    "sweep_section",
    "to_sweep_plan",
    "vs_parent",
]
