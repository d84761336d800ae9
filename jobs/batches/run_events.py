"""The events a running batch sends about each configuration: its phases as the engine reports
them, and its end with the verdict (and, with load levels, each level's)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobs.core.capacity import capacity_of
from jobs.core.events import EventSink, make_event
from jobs.core.levels import baseline_levels, report_levels
from jobs.core.plans import BatchPlan
from jobs.core.records import RunRecord
from jobs.core.verdicts import Metric, Verdict, median
from jobs.core.workloads import RESULT_KEYS


def phase_emitter(
    sink: EventSink, batch_id: str, approach: str, index: int, of: int
) -> Callable[[str, dict[str, Any]], None]:
    def emit(phase: str, details: dict[str, Any]) -> None:
        extra = dict(details)
        if "of" in extra:  # the engine's "of" counts repetitions; the event's, configurations
            extra["reps"] = extra.pop("of")
        sink.emit(make_event(
            "approach.phase", batch_id, approach=approach, index=index + 1, of=of,
            phase=phase, **extra,
        ))

    return emit


def emit_finished(
    sink: EventSink,
    record: RunRecord,
    *,
    verdict: Verdict | None,
    plan: BatchPlan,
    metric: Metric,
    index: int,
    of: int,
) -> None:
    fields: dict[str, Any] = {"status": record.status, "verdict": None, "value": None,
                              "delta_pct": None, "cause": None, "why": "", "metric": plan.metric}
    if verdict is not None:
        fields.update(verdict=verdict.verdict, value=verdict.value, delta_pct=verdict.delta_pct,
                      cause=verdict.cause, why=verdict.why)
        if (levels := report_levels(verdict)) is not None:
            fields["by_load"] = levels
        if verdict.categories:  # docs/contracts.md "Workloads that represent the traffic"
            fields["by_category"] = [{k: e.get(k) for k in RESULT_KEYS}
                                     for e in verdict.categories]
    elif record.role == "baseline":
        fields.update(value=median(record.samples(plan.metric)))
        if (levels := baseline_levels(record, plan.levels, metric=metric)) is not None:
            fields["by_load"] = levels
    if (found := capacity_of(record)) is not None:  # docs/contracts.md "Capacity under the SLO"
        fields["capacity"] = {"knob": found.spec.knob, "value": found.value,
                              "binding": found.binding}
    sink.emit(make_event(
        "approach.finished", record.batch, approach=record.approach, index=index + 1, of=of,
        **fields,
    ))

