"""A watch's batch after its runs (docs/contracts.md "Regression watch"): its points added to the
watch's series, each series' newest point judged, and any candidate settled by a confirmation,
the same batch again at once on the same worker (`"confirms": BATCH`, as a sweep's winner is).

Everything here resumes from the store: a point or a candidate already stored is kept, and the
confirmation batch is found again by its idempotency key, so a worker killed mid-confirmation
settles the night without running anything twice.

A confirmed change with a stack diff keeps where it lies among this host's stacks (`"span"`: the
stacks between its last good and first bad point, or what a bisection would need), so that its
alert can say whether a bisection starts.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

from jobs.batches.bisecting import host_span
from jobs.core.plans import BatchPlan, BatchRow, load_label
from jobs.core.records import RunRecord
from jobs.core.stacks import why_not_bisected
from jobs.core.watch import (
    CANDIDATE,
    CONFIRMED,
    Candidate,
    Change,
    SeriesKey,
    SeriesPoint,
    candidate_change,
    cuts_of,
    find_candidate,
    judged_keys,
    point_stack,
    points_of,
    settle,
)
from jobs.errors import UserError
from jobs.evidence.model_revision import model_revision
from jobs.store import TERMINAL_STATES, Store


def confirmation_key(batch_id: str) -> str:
    """The idempotency key of a night's confirmation batch."""
    return f"watch-confirm:{batch_id}"


def night_points(
    plan: BatchPlan, records: Sequence[RunRecord], *, row: BatchRow, host: str | None,
) -> list[SeriesPoint]:
    """The points a batch of the watch adds, dated by its slot (or its creation)."""
    at = dt.datetime.fromisoformat(plan.watch_at) if plan.watch_at else row.created_at
    keys = judged_keys(metric=plan.metric, lower_is_better=plan.lower_is_better,
                       slo=tuple(plan.slo))

    def stack_of(record: RunRecord) -> dict[str, Any]:
        return point_stack(record.fingerprint, engine=record.engine or plan.engine, host=host,
                           model_revision=model_revision(record.server_args,
                                                         engine=plan.engine))

    return points_of(records, keys=keys, at=at, stack_of=stack_of, load_label=load_label)


def judge_night(
    plan: BatchPlan,
    *,
    row: BatchRow,
    records: Sequence[RunRecord],
    store: Store,
    host: str | None,
    new_id: Callable[[], str],
    execute: Callable[[str], Any],
) -> list[dict[str, Any]]:
    """Add the night's points, judge each series' newest point, settle the candidates by one
    confirmation batch; the changes this night found, as the report keeps them."""
    assert plan.watch is not None
    watch_id = plan.watch
    store.put_points(watch_id, night_points(plan, records, row=row, host=host))
    series: dict[SeriesKey, list[SeriesPoint]] = {}
    for point in store.series(watch_id):
        series.setdefault(point.key, []).append(point)
    cuts = cuts_of(store.watch_changes(watch_id))
    found: list[tuple[Candidate, list[SeriesPoint]]] = []
    for key, points in series.items():
        if points[-1].batch != row.id:
            continue
        candidate = find_candidate(points, cuts=cuts.get(key, set()),
                                   min_effect_pct=plan.min_effect_pct)
        if candidate is not None:
            found.append((candidate, points))
    if not found:
        return []
    confirming, _ = store.create_batch(
        batch_id=new_id(), preset=plan.preset, engine=plan.engine, queue=plan.queue,
        requested_by=row.requested_by, plan=confirmation_plan(plan, batch_id=row.id),
        channel=None, idempotency_key=confirmation_key(row.id))
    stored = [(store.put_change(watch_id, candidate_change(c, series=s,
                                                            confirmation=confirming.id)), c, s)
              for c, s in found]
    if all(change.state != CANDIDATE for change, _, _ in stored):
        return [change.to_dict() for change, _, _ in stored]
    if confirming.state not in TERMINAL_STATES:
        execute(confirming.id)
    again = {p.key: p for p in night_points(plan, store.records(confirming.id), row=row,
                                            host=host)}
    settled: list[Change] = []
    for change, candidate, points in stored:
        if change.state != CANDIDATE:
            settled.append(change)
            continue
        outcome = settle(candidate, series=points, confirmation=again.get(change.key),
                         confirming_batch=confirming.id, min_effect_pct=plan.min_effect_pct)
        if outcome.state == CONFIRMED and (span := stacks_span(plan, outcome)) is not None:
            outcome = dataclasses.replace(outcome, data={**outcome.data, "span": span})
        assert change.id is not None
        store.settle_change(change.id, outcome)
        settled.append(dataclasses.replace(outcome, id=change.id))
    return [change.to_dict() for change in settled]


def stacks_span(plan: BatchPlan, change: Change) -> dict[str, Any] | None:
    """Where a confirmed change lies among this host's stacks (docs/contracts.md "Stacks",
    bisect): the stacks between its last good and first bad point, or what a bisection would
    need; None when no stack can explain it (no stack diff, or an environment change)."""
    asked = change.bisect()
    if why_not_bisected(asked, engine=plan.engine) is not None:
        return None
    try:
        return host_span(plan, asked).to_dict()
    except UserError as exc:  # the host's stacks file cannot be used: the alert says so
        return {"error": str(exc)}


def confirmation_plan(plan: BatchPlan, *, batch_id: str) -> BatchPlan:
    """The night's batch again: its configurations (a sweep's points are the sweep's own
    business), its repetitions, load levels and SLO."""
    return dataclasses.replace(plan, sweep=None, confirms=batch_id, warnings=())
