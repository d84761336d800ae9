"""The report's load levels and SLO (docs/contracts.md "Load levels and service-level objectives").

What a batch judged level by level (jobs.core.levels) adds to its report: the levels and the SLO,
each result's `by_load` and `crossover`, the baseline's `by_load`, and a key achievement that
names its load. A batch without loads or SLO gets none of these keys: its report is as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jobs.core.levels._levels import (
    breach_text,
    breaches,
    crossover,
    figures,
    report_levels,
    slo_state,
    view,
)
from jobs.core.noise import few_samples_caveat
from jobs.core.plans import Load, load_label
from jobs.core.records import RunRecord
from jobs.core.verdicts import Metric, Verdict, has_failed, median


def loads_of(records: Sequence[RunRecord]) -> dict[str, Any] | None:
    """{"knob": "max-concurrency", "levels": [1, 4, 16, 64]} from the first run with levels
    (the baseline first); None when no run has any."""
    for record in sorted(records, key=lambda r: r.role != "baseline"):
        loads = [level["load"] for level in record.by_load if level["load"]]
        if loads:
            knob = next(iter(loads[0]))
            return {"knob": knob, "levels": [load[knob] for load in loads]}
    return None


def key_achievement(
    approaches: Sequence[RunRecord], verdicts: Sequence[Verdict], *, loads: bool
) -> dict[str, Any] | None:
    """The largest improvement at any level whose SLO is met, with its `load` when the batch
    has load levels: an improved or a mixed result's improved level."""
    best: dict[str, Any] | None = None
    for record, verdict in zip(approaches, verdicts, strict=True):
        if verdict.verdict not in ("improved", "mixed"):
            continue
        for level in verdict.levels:
            delta = level["delta_pct"]
            if level["verdict"] != "improved" or level["slo"] == "violated" or delta is None:
                continue
            if best is None or delta > best["delta_pct"]:
                best = {"approach": record.approach, "value": level["value"], "delta_pct": delta,
                        "load": dict(level["load"]) if loads and level["load"] else None}
    if best is not None and not loads:
        del best["load"]  # an SLO without loads: the key achievement reads as it always has
    return best


def add_levels(
    report: dict[str, Any],
    *,
    records: Sequence[RunRecord],
    baseline: RunRecord,
    verdicts: Sequence[Verdict],
    metric: Metric,
) -> None:
    """The report's level keys, in place: `loads`, `slo`, the baseline's and each result's
    `by_load`, each result's `crossover`."""
    loads = loads_of(records)
    report["loads"] = loads
    report["slo"] = dict(metric.limits)
    # whether any run reported an SLO key at all (records from before the SLO, or a benchmark
    # that does not report it, cannot be judged by it: the summary says so)
    report["slo_measured"] = any(
        key in part for r in records for key in metric.limits
        for part in (r.metrics, *(lv.get("metrics") or {} for lv in r.by_load)))
    # docs/contracts.md "Noise, measured": a tail percentile over too few requests is judged,
    # and marked
    caveats = [c for key in metric.limits if (c := few_samples_caveat(key, metric.requests))]
    report["slo_caveats"] = caveats
    report["slo_samples"] = "few" if caveats else None
    levels: list[Load] = [] if loads is None else [{loads["knob"]: v} for v in loads["levels"]]
    report["baseline"]["by_load"] = baseline_levels(baseline, levels, metric=metric)
    for result, verdict in zip(report["results"], verdicts, strict=True):
        result["by_load"] = report_levels(verdict) if levels else None
        result["crossover"] = crossover(verdict.levels) if verdict.verdict == "mixed" else None
    if caveats:
        for entry in [*(report["baseline"]["by_load"] or []),
                      *(e for r in report["results"] for e in r["by_load"] or [])]:
            if entry.get("slo") is not None:
                entry["slo_samples"] = "few"


def baseline_levels(
    baseline: RunRecord, loads: Sequence[Load], *, metric: Metric
) -> list[dict[str, Any]] | None:
    """The baseline at each load level: value, status, SLO, figures and why; None without
    levels (`loads` empty or [{}])."""
    if not any(loads):
        return None
    return [_baseline_level(baseline, load, metric=metric) for load in loads]


def _baseline_level(baseline: RunRecord, load: Load, *, metric: Metric) -> dict[str, Any]:
    run = view(baseline, load)
    failed = has_failed(run, metric.name)
    state = slo_state(run, metric)
    if run.status in ("skipped", "cancelled"):
        why = "not reached" if run.status == "skipped" else "stopped by a cancel"
    elif failed:
        why = run.status if run.status in ("failed", "timeout") else f"no {metric.name}"
    elif state == "violated":
        broken, _ = breaches(run, metric.limits)
        why = "; ".join(f"{breach_text(key, value, metric.limits[key])} limit at "
                        f"{load_label(load)}" for key, value in broken.items())
    else:
        why = ""
    return {"load": dict(load), "value": median(run.samples(metric.name)),
            "status": run.status if run.status in ("skipped", "cancelled")
            else "failed" if failed else run.status,
            "slo": state, "figures": figures(run, metric), "why": why}

