"""Workloads that represent the traffic (docs/contracts.md): a workload's file read and checked
(`_workload_files`), each category as the engine's bench client reads it offline
(`_bench_inputs`), a workload's run record and its views (`_category_records`), each category
judged and the result's verdict over them, `mixed` naming where it wins and loses
(`_category_verdicts`: the `judge` every batch goes through), the report's workload keys
(`_category_report`) and their words (`category_text`, a module the templates call), and the
prompts a run was measured on, with the caveat a speculative verdict on synthetic ones carries
(`_prompts`)."""

from jobs.core.workloads import _category_text as category_text
from jobs.core.workloads._bench_inputs import (
    FORMATS,
    category_bench,
    input_format,
    input_suffix,
    input_text,
)
from jobs.core.workloads._category_records import (
    at_category,
    by_category,
    category_accept,
    category_names,
    has_categories,
    mean_metrics,
)
from jobs.core.workloads._category_report import (
    RESULT_KEYS,
    add_categories,
    workload_of,
)
from jobs.core.workloads._category_verdicts import (
    category_why,
    judge,
    names_text,
    overall,
)
from jobs.core.workloads._prompts import (
    CAVEAT,
    is_synthetic,
    prompts_of,
    speculates,
    synthetic_caveat,
    workload_steps,
    workload_variants,
)
from jobs.core.workloads._workload_files import (
    MAX_WORKLOAD_BYTES,
    Category,
    Workload,
    parse_workload,
    read_workload,
    workload_path,
)

__all__ = [
    "CAVEAT",
    "FORMATS",
    "MAX_WORKLOAD_BYTES",
    "RESULT_KEYS",
    "Category",
    "Workload",
    "add_categories",
    "at_category",
    "by_category",
    "category_accept",
    "category_bench",
    "category_names",
    "category_text",
    "category_why",
    "has_categories",
    "input_format",
    "input_suffix",
    "input_text",
    "is_synthetic",
    "judge",
    "mean_metrics",
    "names_text",
    "overall",
    "parse_workload",
    "prompts_of",
    "read_workload",
    "speculates",
    "synthetic_caveat",
    "workload_of",
    "workload_path",
    "workload_steps",
    "workload_variants",
]
