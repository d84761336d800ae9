"""A workload's run record (docs/contracts.md "Workloads that represent the traffic"): its
`by_category`, every category in order, each `{"category", "prompts", "metrics",
"server_metrics", "status", "warmup", "repetitions"}`; the run at one category as a record of its
own; and the record's top-level metrics, the categories' mean.

The top-level metrics weigh every category the same: repetition by repetition, each figure is
the mean of the categories' (over the repetitions every category measured), the accept length
the mean of theirs. So what reads a record without knowing workloads (a sweep's point, compare,
the digest, a watch) reads the workload's figure.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from jobs.core.records import STATUSES, RunRecord

DIGITS = 9  # a mean's decimals: its float's last bits are noise, not measurement


def by_category(record: RunRecord) -> list[dict[str, Any]]:
    """The run at each category of its workload, in order; [] for a run of a batch without."""
    found = record.extra.get("by_category")
    if not isinstance(found, list):
        return []
    return [entry for entry in found
            if isinstance(entry, dict) and isinstance(entry.get("category"), str)]


def has_categories(records: Sequence[RunRecord]) -> bool:
    return any(by_category(r) for r in records)


def category_names(records: Sequence[RunRecord]) -> list[str]:
    """Every category the runs measured, the baseline's order first."""
    ordered = sorted(records, key=lambda r: r.role != "baseline")
    return list(dict.fromkeys(e["category"] for r in ordered for e in by_category(r)))


def at_category(record: RunRecord, name: str) -> RunRecord:
    """The run as one category saw it: its metrics, status, warm-up and repetitions, and its
    closing bracket's at that category; a category the run does not list is one it never
    reached (skipped)."""
    entries = by_category(record)
    entry = next((e for e in entries if e["category"] == name), None)
    if entry is None:
        return dataclasses.replace(record, metrics={}, status="skipped",
                                   extra=_without_categories(record.extra))
    extra = _without_categories(record.extra)
    extra.update({k: entry[k] for k in ("warmup", "repetitions", "server_metrics") if k in entry})
    bracket = record.extra.get("bracket")
    if isinstance(bracket, dict) and isinstance(bracket.get("by_category"), list):
        closing = next((e for e in bracket["by_category"]
                        if isinstance(e, dict) and e.get("category") == name), {})
        extra["bracket"] = {**{k: v for k, v in bracket.items() if k != "by_category"},
                            "metrics": closing.get("metrics") or {},
                            "status": closing.get("status", bracket.get("status", "ok"))}
    metrics = entry.get("metrics")
    status = entry.get("status")
    return dataclasses.replace(record, metrics=dict(metrics) if isinstance(metrics, dict) else {},
                               status=status if status in STATUSES else "ok", extra=extra)


def _without_categories(extra: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in extra.items()
            if k not in ("by_category", "warmup", "repetitions", "server_metrics", "bracket")}


def mean_metrics(entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The record's top-level metrics from its categories' (see the module): each figure's mean
    over the categories, repetition by repetition, where every category measured it."""
    measured = [e.get("metrics") or {} for e in entries if e.get("status", "ok") == "ok"]
    if not measured or len(measured) != len(entries):
        return {}
    out: dict[str, Any] = {}
    keys = dict.fromkeys(k for m in measured for k in m if k != "accept_length")
    for key in keys:
        lists = [m.get(key) for m in measured]
        if not all(isinstance(v, list) for v in lists):
            continue
        reps = min(len(v) for v in lists if isinstance(v, list))
        out[key] = [round(sum(float(v[i]) for v in lists if isinstance(v, list)) / len(lists),
                          DIGITS) for i in range(reps)]
    lengths = [float(m["accept_length"]) for m in measured if _is_number(m.get("accept_length"))]
    out["accept_length"] = round(sum(lengths) / len(lengths), DIGITS) if lengths else None
    return out


def category_accept(entry: dict[str, Any]) -> float | None:
    """A category's accept length: the server's own metrics' mean over its repetitions, else
    the benchmark's figure (None: it did not speculate, or nothing said)."""
    served = entry.get("server_metrics")
    if isinstance(served, dict) and _is_number(served.get("accept_length")):
        return float(served["accept_length"])
    metrics = entry.get("metrics") or {}
    value = metrics.get("accept_length")
    return float(value) if isinstance(value, int | float) and _is_number(value) else None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
