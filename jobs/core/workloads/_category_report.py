"""The report's workload (docs/contracts.md "Workloads that represent the traffic"): what a batch
that ran one adds to its report. The report's `workload` (the file, its hash, each category's
prompts), the baseline's `by_category` (its value, status and accept length at each category)
and each result's `by_category` (`{"category", "verdict", "cause", "value", "delta_pct",
"accept_length", "why"}`), a mixed one's `crossover` (the categories it improved and regressed
on, and the words). A batch without a workload gets none of these keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jobs.core.records import RunRecord
from jobs.core.verdicts import Metric, Verdict, has_failed, median
from jobs.core.workloads._category_records import (
    at_category,
    by_category,
    category_accept,
    category_names,
)
from jobs.core.workloads._category_verdicts import names_text

RESULT_KEYS = ("category", "verdict", "cause", "value", "delta_pct", "accept_length", "why")


def workload_of(records: Sequence[RunRecord]) -> dict[str, Any] | None:
    """The workload the batch ran (the baseline's record first): its `workload` summary."""
    for record in sorted(records, key=lambda r: r.role != "baseline"):
        found = record.extra.get("workload")
        if isinstance(found, dict):
            return dict(found)
    return None


def add_categories(report: dict[str, Any], *, records: Sequence[RunRecord], baseline: RunRecord,
                   verdicts: Sequence[Verdict], metric: Metric) -> None:
    """The report's workload keys, in place (see the module)."""
    names = category_names(records)
    report["workload"] = workload_of(records) or {"categories": [{"category": n} for n in names]}
    report["baseline"]["by_category"] = [_baseline_at(baseline, name, metric=metric)
                                         for name in names]
    for result, verdict in zip(report["results"], verdicts, strict=True):
        result["by_category"] = [{k: e.get(k) for k in RESULT_KEYS}
                                 for e in verdict.categories] or None
        if verdict.verdict == "mixed" and verdict.categories:
            result["crossover"] = crossover(verdict.categories)


def crossover(entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Where a mixed result wins and loses, as a leveled result's crossover is shaped (what the
    digest and a sweep's line quote): the categories improved, those regressed, and the text
    ("improved on conversation and code, regressed on summarization")."""
    ups = [e["category"] for e in entries if e["verdict"] == "improved"]
    downs = [e["category"] for e in entries if e["verdict"] == "regressed"]
    return {"improved": ups, "regressed": downs,
            "text": f"improved on {names_text(ups)}, regressed on {names_text(downs)}"}


def _baseline_at(baseline: RunRecord, name: str, *, metric: Metric) -> dict[str, Any]:
    run = at_category(baseline, name)
    entry = next((e for e in by_category(baseline) if e["category"] == name), {})
    failed = has_failed(run, metric.name)
    status = run.status if run.status in ("skipped", "cancelled") \
        else "failed" if failed else run.status
    return {"category": name, "value": median(run.samples(metric.name)), "status": status,
            "accept_length": category_accept(entry) if entry else None,
            "prompts": entry.get("prompts")}
