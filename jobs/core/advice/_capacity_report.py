"""What a batch with a capacity search adds to its report (docs/contracts.md "Capacity under
the SLO"): each result's `capacity` judged against the baseline's, with the goodput beside it;
the baseline's own; the report's `capacity` (the search and its SLO); and a key achievement
that considers it.

A run the verdict rules cannot compare (failed, cancelled, skipped; a failed baseline, a
confound, another stack, a fallback) has no capacity verdict of its own: it takes the result's.
With `metric: capacity` the result's verdict is the capacity's (jobs.core.verdicts), so the two
agree by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jobs.core.capacity import (
    CAPACITY,
    CapacityVerdict,
    amount,
    binds_text,
    capacity_of,
    carries,
    closing_capacity,
    judge_capacity,
    not_judged,
)
from jobs.core.noise import few_samples_caveat
from jobs.core.records import RunRecord
from jobs.core.verdicts import Metric, Verdict

GOODPUT = "output_throughput"
"""Throughput at capacity when the batch's metric is no throughput (every engine reports it)."""
VOID = ("baseline", "confound", "drift", "fallback")
"""Reasons an inconclusive result's comparison is void, for its capacity too."""


def goodput_key(metric: Metric) -> str:
    """The throughput reported at capacity: the batch's metric when it is one, else
    output_throughput."""
    if metric.name == CAPACITY or metric.lower_is_better or not metric.name.endswith(
            "throughput"):
        return GOODPUT
    return metric.name


def has_capacity(records: Sequence[RunRecord]) -> bool:
    return any(capacity_of(r) is not None for r in records)


def result_capacity(record: RunRecord, verdict: Verdict, *, baseline: RunRecord,
                    metric: Metric) -> dict[str, Any] | None:
    """A result's `capacity` (None when its batch searched for none)."""
    ours, theirs = capacity_of(record), capacity_of(baseline)
    key = goodput_key(metric)
    if ours is None and theirs is None:
        return None
    void = verdict.verdict in ("failed", "cancelled", "skipped") or (
        verdict.verdict == "inconclusive" and verdict.reason in VOID)
    if ours is None or void:
        found = not_judged(ours, verdict=verdict.verdict, why=verdict.why)
    elif metric.name == CAPACITY:  # the result's verdict is the capacity's already
        found = CapacityVerdict(verdict.verdict, verdict.value, verdict.delta_pct, ours.binding,
                                verdict.why)
    else:
        found = judge_capacity(ours, theirs if theirs is not None and baseline.status == "ok"
                               else None, name=record.approach,
                               min_effect_pct=metric.min_effect_pct, slo=metric.limits,
                               closing=closing_capacity(baseline))
    goodput = None if ours is None or found.value is None else ours.median_at(key)
    entry = found.entry(goodput=goodput, goodput_key=key)
    if ours is not None and found.value is not None:  # the capacity as a bench setting
        entry["load"] = ours.spec.load(found.value)
    entry["above"] = None if ours is None else ours.above  # the lowest load that broke it
    return entry


def baseline_capacity(baseline: RunRecord, *, metric: Metric) -> dict[str, Any] | None:
    """The baseline's capacity as the report keeps it: value, binding key, goodput, in words."""
    found = capacity_of(baseline)
    if found is None:
        return None
    key = goodput_key(metric)
    binds = binds_text(found)
    why = carries("the baseline", found, metric.limits) + (f"; {binds}" if binds else "")
    if not found.complete:
        why += (f"; the search ended before its precision ({len(found.levels)} levels, "
                f"status {baseline.status})")
    closing = closing_capacity(baseline)
    if closing is not None:
        why += f"; its closing run carries {amount(found.spec, closing.value)}"
    return {"value": found.value, "binding": found.binding, "above": found.above,
            "complete": found.complete, "levels": len(found.levels),
            "goodput": found.median_at(key) if found.value is not None else None,
            "goodput_key": key, "why": why}


def capacity_section(records: Sequence[RunRecord], *, metric: Metric) -> dict[str, Any] | None:
    """The report's `capacity`: the search (knob, from, max), the SLO it searched within and
    its tail-sample caveats."""
    found = next((f for r in sorted(records, key=lambda r: r.role != "baseline")
                  if (f := capacity_of(r)) is not None), None)
    if found is None:
        return None
    caveats = [c for key in metric.limits if (c := few_samples_caveat(key, metric.requests))]
    return {**found.spec.to_dict(), "slo": dict(metric.limits), "slo_caveats": caveats,
            "slo_samples": "few" if caveats else None}


def capacity_key(results: Sequence[dict[str, Any]], key: dict[str, Any] | None, *,
                 records: Sequence[RunRecord]) -> dict[str, Any] | None:
    """The key achievement, considering capacity: the largest capacity improvement (the
    question the batch asked), else the metric's key achievement unless its capacity
    regressed (a report never crowns what carries less within the SLO)."""
    improved = [r for r in results if (r.get("capacity") or {}).get("verdict") == "improved"]
    if improved:
        best = max(improved, key=lambda r: (r["capacity"]["delta_pct"] is None,
                                            r["capacity"]["delta_pct"] or 0.0))
        capacity = best["capacity"]
        found = next(capacity_of(r) for r in records if r.approach == best["approach"])
        assert found is not None
        return {"approach": best["approach"], "value": capacity["value"],
                "delta_pct": capacity["delta_pct"], "metric": CAPACITY,
                "text": f"carries {amount(found.spec, capacity['value'])} within the SLO",
                "why": capacity["why"]}
    if key is None:
        return None
    mine = next((r for r in results if r["approach"] == key["approach"]), None)
    if mine is not None and (mine.get("capacity") or {}).get("verdict") == "regressed":
        return None
    return key
