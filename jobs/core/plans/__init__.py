"""Presets and plans: everything decided before a server starts (docs/contracts.md "Preset
format", "Command line"). A preset's models (`_preset_models`), its files read and checked
(`_preset_files`, `_presets`), the knobs never overridable (`_protected_knobs`), `--set` read once
and checked once (`_overrides`), secrets as references (`_secret_refs`), its bench settings and
metric checked (`_bench_checks`), its load levels and SLO (`_loads`), its workload against the
rest of it (`_workload_checks`); the plan as data that travels (`_batch_plan`), its resolution
(`_plans`) and the stored batch row (`_batches`)."""

from jobs.core.configs import RunConfig
from jobs.core.plans._batch_plan import (
    PROBE,
    BatchPlan,
    to_plan,
)
from jobs.core.plans._batches import (
    BatchRow,
)
from jobs.core.plans._bench_checks import (
    BOUNDS,
    bench_problems,
    metric_problems,
)
from jobs.core.plans._loads import (
    Load,
    bench_at,
    load_label,
    load_problems,
    load_value,
    slo_problems,
)
from jobs.core.plans._overrides import (
    Override,
    Overrides,
    Refusal,
    parse_sets,
    passable_problem,
)
from jobs.core.plans._plans import (
    confounds,
    only,
    resolve,
)
from jobs.core.plans._preset_models import (
    Preset,
    Scalar,
    Workload,
)
from jobs.core.plans._presets import (
    MAX_NAME_CHARS,
    NAMES_ONLY,
    find_named_preset,
    find_preset,
    is_preset_name,
    load_all,
    load_preset,
    parse_preset,
    preset_names,
)
from jobs.core.plans._protected_knobs import (
    is_protected_knob,
)
from jobs.core.plans._secret_refs import (
    ARG_UNSET_LINE,
    UNSET_LINE,
    first_literal_secret,
    first_literal_secret_arg,
    is_literal_secret,
    is_literal_secret_arg,
    is_secret_arg,
    literal_arg_values,
    literal_secret_arg_reason,
    literal_secret_reason,
    masked_args,
    reference_name,
    reference_values,
    resolve_args,
    resolve_env,
)
from jobs.core.plans._workload_checks import (
    owned_args,
    workload_problems,
)

__all__ = [
    "ARG_UNSET_LINE",
    "BOUNDS",
    "BatchPlan",
    "BatchRow",
    "Load",
    "MAX_NAME_CHARS",
    "NAMES_ONLY",
    "Override",
    "Overrides",
    "PROBE",
    "Refusal",
    "Preset",
    "RunConfig",
    "Scalar",
    "UNSET_LINE",
    "Workload",
    "bench_at",
    "bench_problems",
    "confounds",
    "find_named_preset",
    "find_preset",
    "first_literal_secret",
    "first_literal_secret_arg",
    "is_literal_secret",
    "is_literal_secret_arg",
    "is_preset_name",
    "is_protected_knob",
    "is_secret_arg",
    "literal_arg_values",
    "literal_secret_arg_reason",
    "literal_secret_reason",
    "load_all",
    "load_label",
    "load_preset",
    "load_problems",
    "load_value",
    "masked_args",
    "metric_problems",
    "only",
    "owned_args",
    "parse_preset",
    "parse_sets",
    "passable_problem",
    "preset_names",
    "reference_name",
    "reference_values",
    "resolve",
    "resolve_args",
    "resolve_env",
    "slo_problems",
    "to_plan",
    "workload_problems",
]
