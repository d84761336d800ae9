"""What a sweep's recorded points measured: one value per point, the median of the batch's
metric (None without a sample).

The worker searches and judges the sweep from these values (jobs.batches.sweeping) and the chat
thread draws its landscape from them (bot.thread.summary_message): one rule, here, so that the
chart always shows the values the search and the report went by.
"""

from __future__ import annotations

from collections.abc import Iterable

from jobs.core.batch_plan import BatchPlan
from jobs.core.records import RunRecord
from jobs.core.verdicts import median


def point_values(plan: BatchPlan, records: Iterable[RunRecord]) -> dict[str, float | None]:
    """Each recorded point's value (the median of the metric; None without a sample); {} for
    a plan without a sweep."""
    sweep = plan.sweep
    return {r.approach: median(r.samples(plan.metric)) for r in records
            if sweep is not None and sweep.is_point(r.approach)}
