"""A configuration's server started several times (docs/contracts.md "Noise, measured"):
`starts: N` spreads its repetitions over N starts, so its range holds the restart noise.

`spread_reps` says how many repetitions each start runs; `merge_starts` makes the starts' records
one record: every repetition's sample in `metrics` (in the order they ran), each start's own
metrics under `starts`, the status of the first start that did not end well.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from jobs.core.records import RunRecord

MAX_STARTS = 5


def spread_reps(reps: int, starts: int) -> list[int]:
    """Repetitions per start, the earlier starts taking one more where they do not divide:
    7 over 3 starts is [3, 2, 2]. Every start runs at least one (the plan checks reps >= starts)."""
    return [reps // starts + (1 if index < reps % starts else 0) for index in range(starts)]


def merge_starts(records: Sequence[RunRecord]) -> RunRecord:
    """The starts' records (run order) as one: the last start's identity and end, the first's
    start time, every sample; a failed start's status, exit code and log tail."""
    first, last = records[0], records[-1]
    ended = next((r for r in records if r.status != "ok"), last)
    extra: dict[str, Any] = dict(first.extra)
    extra["starts"] = [{"metrics": r.metrics, "status": r.status, "started_at": r.started_at,
                        "finished_at": r.finished_at} for r in records]
    reps = [{**rep, "start": index + 1} for index, r in enumerate(records)
            for rep in _list(r.extra.get("repetitions"))]
    if reps:
        extra["repetitions"] = reps
    fallbacks = list(dict.fromkeys(line for r in records for line in _list(r.extra.get(
        "fallbacks"))))
    if fallbacks:
        extra["fallbacks"] = fallbacks
    for key in ("by_load", "by_category"):  # the load levels, or a workload's categories
        levels = [_list(r.extra.get(key)) for r in records]
        if any(levels):
            extra[key] = _merged_levels(levels)
    # docs/contracts.md "Capacity under the SLO": each start searches its own; the record's is
    # the lowest any start found (none below a number): what one server carries after a restart
    capacities = [(index, r.extra["capacity"]) for index, r in enumerate(records)
                  if isinstance(r.extra.get("capacity"), dict)]
    if capacities:
        for index, found in capacities:
            extra["starts"][index]["capacity"] = found
        extra["capacity"] = min((found for _, found in capacities), key=_capacity_order)
    return dataclasses.replace(
        last, status=ended.status, exit_code=ended.exit_code, log_tail=ended.log_tail,
        metrics=_merged_metrics([r.metrics for r in records]), started_at=first.started_at,
        extra=extra)


def _merged_metrics(each: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Lists joined in run order; a single figure (the accept length) averaged over the starts
    that have one."""
    out: dict[str, Any] = {}
    for key in dict.fromkeys(k for metrics in each for k in metrics):
        values = [metrics.get(key) for metrics in each if key in metrics]
        lists = [v for v in values if isinstance(v, list)]
        if len(lists) == len(values):
            out[key] = [x for v in lists for x in v]
        else:
            numbers = [float(v) for v in values
                       if isinstance(v, int | float) and not isinstance(v, bool)]
            out[key] = sum(numbers) / len(numbers) if numbers else None
    return out


def _merged_levels(each: Sequence[list[Any]]) -> list[dict[str, Any]]:
    """Each level's (or category's) entries across the starts as one entry: its samples joined,
    its status the first that did not end well, its warm-up and server metrics the first
    start's."""
    merged: list[dict[str, Any]] = []
    for index, level in enumerate(each[0]):
        entries = [levels[index] for levels in each if index < len(levels)]
        status = next((e.get("status") for e in entries if e.get("status", "ok") != "ok"), "ok")
        merged.append({
            **level, "status": status,
            "metrics": _merged_metrics([e.get("metrics") or {} for e in entries]),
            "repetitions": [{**rep, "start": start + 1} for start, e in enumerate(entries)
                            for rep in _list(e.get("repetitions"))],
        })
    return merged


def _capacity_order(found: dict[str, Any]) -> tuple[bool, float]:
    value = found.get("value")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return True, float(value)
    return False, 0.0


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
