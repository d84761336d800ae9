"""The status digest: what the stored batches of the last days add up to. Pure data in, out.

`build_digest` takes batch rows (with their reports) and run records and returns plain data:
the batches of the period, the best configuration per preset and hardware and how it moved,
the wins, the failures by cause, the inconclusives still open and the next steps still open;
and, from memory across batches (SPEC.md), the regressions between consecutive batches with the
stack change that came with them, the known dead ends skipped and the GPU-hours that saved, the
GPU-hours spent per preset, and the dead ends an upgrade re-opened (`Memory`, `memory_sections`).
`jobs.commands.digest` gathers its inputs from the store (`jobs.store.digest_queries`: the
window's batches and only the earlier rows each section needs); the templates `digest.*.j2`
format it.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from jobs.core.digest_memory import (
    Measurement,
    Memory,
    measurements,
    memory_of,
    memory_sections,
)
from jobs.core.records import RunRecord
from jobs.core.rules import RuleSet, load_rules
from jobs.core.verdicts import change_pct, is_better

if TYPE_CHECKING:
    from jobs.store import BatchRow

CONCLUSIVE = ("improved", "regressed", "unchanged")


def build_digest(
    rows: Sequence[BatchRow],
    records: Mapping[str, Sequence[RunRecord]],
    *,
    now: dt.datetime,
    days: float,
    tz: str = "UTC",
    memory: Memory | None = None,
    rules: RuleSet | None = None,
) -> dict[str, Any]:
    """The digest of the `days` before `now`. Without `memory`, `rows` and `records` are the
    whole history and every section is computed from them."""
    since = now - dt.timedelta(days=days)
    recent = [r for r in rows if since <= r.created_at <= now]
    reports = [r for r in recent if r.report]
    zone = ZoneInfo(tz)
    if memory is None:
        memory = memory_of(rows, records, since=since, now=now)
    return {
        "period": {
            "days": days, "timezone": tz,
            "from": since.astimezone(zone).strftime("%Y-%m-%d %H:%M"),
            "to": now.astimezone(zone).strftime("%Y-%m-%d %H:%M"),
        },
        "batches": [_batch_line(r, zone) for r in recent],
        "counts": dict(Counter(r.state for r in recent)),
        "best": best_configurations(rows, records, since=since, now=now,
                                    earlier=memory.earlier),
        "wins": [
            {"batch": r.id, "preset": r.preset, "approach": res["approach"],
             "value": res.get("value"), "delta_pct": res.get("delta_pct")}
            for r in reports for res in _results(r) if res.get("verdict") == "improved"
        ],
        "failures": failures_by_cause(reports),
        "inconclusive": open_inconclusives(reports),
        "next_steps": open_next_steps(rows, now=now),
        **memory_sections(rows, records, memory=memory, since=since, now=now,
                          rules=load_rules() if rules is None else rules),
    }


def _batch_line(row: BatchRow, zone: ZoneInfo) -> dict[str, Any]:
    return {"batch": row.id, "preset": row.preset, "state": row.state, "queue": row.queue,
            "requested_by": row.requested_by,
            "created": row.created_at.astimezone(zone).strftime("%Y-%m-%d %H:%M")}


def _results(row: BatchRow) -> list[dict[str, Any]]:
    return list((row.report or {}).get("results") or [])


def best_configurations(
    rows: Sequence[BatchRow],
    records: Mapping[str, Sequence[RunRecord]],
    *,
    since: dt.datetime,
    now: dt.datetime,
    earlier: Sequence[Measurement] | None = None,
) -> list[dict[str, Any]]:
    """Per (preset, hardware): the best measured configuration now, and the best before
    `since`, with the change between them in percent (positive: better). With `earlier`
    (the measurements before `since`), only the window's rows are read from `rows`."""
    if earlier is None:
        points = measurements([r for r in rows if r.created_at <= now], records)
    else:
        window = [r for r in rows if since <= r.created_at <= now]
        points = [*earlier, *measurements(window, records)]
    best_now: dict[tuple[str, str], dict[str, Any]] = {}
    best_before: dict[tuple[str, str], dict[str, Any]] = {}
    for point in points:
        key, lower = (point.preset, point.hardware), point.lower_is_better
        value = point.value
        entry: dict[str, Any] = {
            "preset": point.preset, "hardware": point.hardware, "approach": point.approach,
            "batch": point.batch, "metric": point.metric, "lower_is_better": lower,
            "value": value}
        targets = [best_now] + ([best_before] if point.created_at < since else [])
        for target in targets:
            held = target.get(key)
            if held is None or is_better(value, held["value"], lower_is_better=lower):
                target[key] = entry
    out = []
    for key in sorted(best_now):
        entry = dict(best_now[key])
        before = best_before.get(key)
        entry["previous"] = None if before is None else {
            "approach": before["approach"], "batch": before["batch"], "value": before["value"]}
        change = None
        if before is not None:
            change = change_pct(float(entry["value"]), float(before["value"]),
                                lower_is_better=bool(entry["lower_is_better"]))
        entry["change_pct"] = None if change is None else round(change, 1)
        out.append(entry)
    return out


def failures_by_cause(reports: Sequence[BatchRow]) -> list[dict[str, Any]]:
    by_cause: dict[str, list[str]] = {}
    for row in reports:
        for res in _results(row):
            if res.get("verdict") == "failed":
                cause = str(res.get("cause") or "crash")
                by_cause.setdefault(cause, []).append(f"{row.preset}/{res['approach']}")
    ranked = sorted(by_cause.items(), key=lambda item: (-len(item[1]), item[0]))
    return [{"cause": cause, "count": len(names), "approaches": names} for cause, names in ranked]


def open_inconclusives(reports: Sequence[BatchRow]) -> list[dict[str, Any]]:
    """Inconclusive results that no later batch of the same preset settled."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for row in sorted(reports, key=lambda r: r.created_at):
        for res in _results(row):
            verdict = res.get("verdict")
            if verdict == "inconclusive":
                latest[(row.preset, res["approach"])] = {
                    "batch": row.id, "preset": row.preset, "approach": res["approach"],
                    "why": res.get("why", "")}
            elif verdict in CONCLUSIVE:
                latest.pop((row.preset, res["approach"]), None)
    return list(latest.values())


def open_next_steps(rows: Sequence[BatchRow], *, now: dt.datetime) -> list[dict[str, Any]]:
    """The next steps of each preset's latest report (bar `accept`, which is never open)."""
    latest: dict[str, BatchRow] = {}
    for row in sorted(rows, key=lambda r: r.created_at):
        if row.report and row.created_at <= now:
            latest[row.preset] = row
    return [
        {"preset": preset, "batch": row.id, **step}
        for preset, row in sorted(latest.items())
        for step in (row.report or {}).get("next_steps") or []
        if step.get("kind") != "accept"
    ]


