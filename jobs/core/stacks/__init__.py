"""Stacks (docs/contracts.md "Stacks"): the engine environments a GPU host keeps side by side.
The host's stacks file read and checked (`_stack_file`), stacks in version order, a stack diff
and what a bisection would need (`_order`), an upgrade check's judgement and its one line
(`_upgrade`), a bisection over stacks as plain data (`_bisection`), and where a watch's change
lies among the host's stacks (`_span`)."""

from jobs.core.stacks._bisection import (
    Bisection,
    Judge,
    by_values,
    run_bisection,
)
from jobs.core.stacks._order import (
    between,
    diff_text,
    needed,
    order_stacks,
    stack_diff,
    version_key,
)
from jobs.core.stacks._span import (
    STACK_PARTS,
    Span,
    moved_parts,
    point_label,
    release_key,
    watch_span,
    why_not_bisected,
)
from jobs.core.stacks._stack_file import (
    VARIABLE,
    StackFile,
    StackSpec,
    load_stacks,
    need_stacks,
    parse_stacks,
    to_stack_spec,
)
from jobs.core.stacks._upgrade import (
    OUTCOMES,
    judge_upgrade,
    memory_line,
    outcome,
    pct,
    removed,
    summary_line,
    upgrade_section,
)

__all__ = [
    "OUTCOMES",
    "STACK_PARTS",
    "VARIABLE",
    "Bisection",
    "Judge",
    "Span",
    "StackFile",
    "StackSpec",
    "between",
    "by_values",
    "diff_text",
    "judge_upgrade",
    "load_stacks",
    "memory_line",
    "moved_parts",
    "need_stacks",
    "needed",
    "order_stacks",
    "outcome",
    "point_label",
    "parse_stacks",
    "pct",
    "release_key",
    "removed",
    "run_bisection",
    "stack_diff",
    "summary_line",
    "to_stack_spec",
    "upgrade_section",
    "version_key",
    "watch_span",
    "why_not_bisected",
]
