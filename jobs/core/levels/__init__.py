"""Verdicts that hold under load (docs/contracts.md "Load levels and service-level objectives"):
each level judged and the result's verdict over them (`_levels`), the report's level keys
(`_level_report`) and their words (`level_text`), a comparison's levels (`compare_levels`), a run
within its SLO (`_slo_check`), and a sweep point's value under levels and an SLO
(`_sweep_values`). `level_text` and `compare_levels` are modules the templates call."""

from jobs.core.levels import _compare_levels as compare_levels
from jobs.core.levels import _level_text as level_text
from jobs.core.levels._compare_levels import (
    level_rows,
    loads_warning,
    moved_levels,
    same_loads,
)
from jobs.core.levels._level_report import (
    add_levels,
    baseline_levels,
    key_achievement,
)
from jobs.core.levels._level_text import (
    MARKS,
    at_lowest,
    compact_row,
)
from jobs.core.levels._levels import (
    crossover,
    is_level_aware,
    judge,
    load_number,
    loads_text,
    report_levels,
)
from jobs.core.levels._slo_check import (
    slo_breaches,
    slo_excess,
)
from jobs.core.levels._sweep_values import (
    NO_FEASIBLE,
    Points,
    objective_text,
    point_value,
    slo_section,
)

__all__ = [
    "compare_levels",
    "level_text",
    "MARKS",
    "NO_FEASIBLE",
    "Points",
    "add_levels",
    "at_lowest",
    "baseline_levels",
    "compact_row",
    "crossover",
    "is_level_aware",
    "judge",
    "key_achievement",
    "level_rows",
    "load_number",
    "loads_text",
    "loads_warning",
    "moved_levels",
    "objective_text",
    "point_value",
    "report_levels",
    "same_loads",
    "slo_breaches",
    "slo_excess",
    "slo_section",
]
