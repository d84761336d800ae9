"""A batch's sweep: its points run one by one as the search proposes them, then the winner's
confirmation, a second batch of the baseline and the winner (docs/contracts.md "Sweeps and search").

Everything here resumes from the store: the points already recorded are the search's state, and
the confirmation batch is found again by its idempotency key, so a worker killed mid-sweep or
mid-confirmation finishes the sweep without running a point twice.

Under an SLO (docs/contracts.md "Load levels and service-level objectives") the sweep maximises its
value among the points that met the SLO at every level (jobs.core.levels): the search gets Optuna's
constraints, a repetition stops early only against a point that met it, the winner is the best such
point, and without one there is no confirmation (the report's `sweep.slo` says why). The
confirmation runs at every level of the sweep, under its SLO.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from jobs.core.capacity import CAPACITY
from jobs.core.events import Event, EventSink, make_event
from jobs.core.levels import Points as Points  # where the worker looks
from jobs.core.levels import objective_text, slo_section
from jobs.core.plans import BatchPlan, RunConfig
from jobs.core.records import RunRecord
from jobs.core.sweeps import confirmed_steps, sweep_section, vs_parent
from jobs.core.verdicts import is_better
from jobs.search import next_point
from jobs.store import TERMINAL_STATES, BatchRow, Store
from jobs.store.experiments import confirmation_key


def run_points(
    plan: BatchPlan,
    *,
    batch_id: str,
    points: Points,
    run: Callable[[RunConfig, int, StopEarly | None], RunRecord],
    stop: Callable[[], bool],
) -> None:
    """Run the points the search proposes until it is done; `points` takes in each record.
    Under an SLO the search is told which points met it at every level, and a point's
    repetitions stop early only against the best point that met it."""
    sweep = plan.sweep
    assert sweep is not None
    while not stop():
        values, excess = points.known()  # the baseline-equal point: free information
        name = next_point(sweep, values, lower_is_better=plan.lower_is_better, batch=batch_id,
                          excess=excess if plan.slo else None)
        if name is None:
            return
        index = len(plan.configs) + len([n for n in points.values
                                         if n != sweep.same_as_baseline])
        best = points.best()
        early = None if best is None else cannot_beat(
            best[1], reps=plan.reps, lower_is_better=plan.lower_is_better)
        points.add(run(plan.config(name), index, early))


StopEarly = Callable[[list[float]], bool]


def cannot_beat(best: float, *, reps: int, lower_is_better: bool) -> StopEarly:
    """True once a point's median over `reps` repetitions can no longer beat `best`: more than
    half of them are already worse, so whatever the rest measure, the middle one is too."""
    needed = reps // 2 + 1

    def check(samples: list[float]) -> bool:
        worse = [s for s in samples if not is_better(s, best, lower_is_better=lower_is_better)]
        return len(worse) >= needed

    return check


def winner(plan: BatchPlan, points: Points) -> str | None:
    """The best measured point that met the SLO at every level (any, without an SLO), when it
    beats the baseline's value or the baseline broke the SLO; else nothing to confirm."""
    best, base = points.best(), points.base_value
    if best is None or base is None:
        return None
    if not points.base_feasible:  # the per-level rules: where only the baseline breaks it,
        return best[0]  # the point improved
    return best[0] if is_better(best[1], base, lower_is_better=plan.lower_is_better) else None


def confirmation_plan(plan: BatchPlan, point: str, *, sweep_batch: str) -> BatchPlan:
    """The baseline and the winner only, `confirm_reps` repetitions each: at every load level
    and under the same SLO as the sweep (the plan's `loads` and `slo` are kept)."""
    assert plan.sweep is not None
    return dataclasses.replace(
        plan, configs=(plan.baseline, plan.config(point)), reps=plan.sweep.confirm_reps,
        sweep=None, confirms=sweep_batch, warnings=(),
    )


def confirm(
    plan: BatchPlan,
    row: BatchRow,
    point: str,
    *,
    store: Store,
    execute: Callable[[str], dict[str, Any]],
    new_id: Callable[[], str],
) -> dict[str, Any] | None:
    """Run (or find) the confirmation batch; its verdict on the winner, as the report keeps it."""
    confirming = confirmation_plan(plan, point, sweep_batch=row.id)
    crow, _ = store.create_batch(
        batch_id=new_id(), preset=plan.preset, engine=plan.engine, queue=plan.queue,
        requested_by=row.requested_by, plan=confirming, channel=None,
        idempotency_key=confirmation_key(row.id),
    )
    report = crow.report if crow.state in TERMINAL_STATES and crow.report else execute(crow.id)
    result = next((r for r in (report or {}).get("results", []) if r["approach"] == point), None)
    if result is None:
        return {"batch": crow.id, "approach": point, "verdict": "cancelled", "value": None,
                "delta_pct": None}
    found = {"batch": crow.id, "approach": point, "verdict": result["verdict"],
             "value": result["value"], "delta_pct": result["delta_pct"]}
    key = (report or {}).get("key_achievement") or {}
    if plan.metric == CAPACITY and key.get("approach") == point:  # its capacity in words
        found.update(text=key.get("text"), why=key.get("why"))
    return found


def add_sweep(
    report: dict[str, Any],
    plan: BatchPlan,
    points: Points,
    confirmation: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The sweep batch's report with its `sweep` key and its next steps judged by the
    confirmation alone (jobs.core.sweeps.confirmed_steps)."""
    assert plan.sweep is not None
    _add_section(report, plan, points, confirmation)
    report["next_steps"] = confirmed_steps(
        report["next_steps"], plan.sweep, confirmation, metric=plan.metric,
        base_value=report["baseline"]["value"], key=report.get("key_achievement"))
    return report


def _add_section(report: dict[str, Any], plan: BatchPlan, points: Points,
                 confirmation: Mapping[str, Any] | None) -> None:
    """The report's `sweep` key, its best point against its parent, and its key achievement
    the confirmation's (the best of many noisy points is not one until confirmed): for a sweep
    that has ended and for one still running alike. Its values are the search's
    (jobs.core.levels): with load levels the baseline's and the parent's are taken the
    same way as the points'; under an SLO the best is the best point that met it, and the key
    `slo` says what it left out."""
    assert plan.sweep is not None
    report["sweep"] = sweep_section(
        plan.sweep, points.values, base_value=points.base_value,
        lower_is_better=plan.lower_is_better, confirmation=confirmation,
        feasible=points.feasible if plan.slo else None,
    )
    if plan.loads or plan.metric == CAPACITY:
        report["sweep"]["objective"] = objective_text(plan)
    if plan.slo:
        report["sweep"]["slo"] = slo_section(points)
    best = report["sweep"]["best"]
    if best is not None:
        # the winner's figure is its confirmation's once it has one (without load levels: with
        # them the confirmation's value is one level's, not the search's geometric mean)
        measured = confirmation if confirmation is not None and not plan.loads \
            and confirmation.get("value") is not None \
            and confirmation.get("approach") == best.get("approach") else None
        best["vs_parent"] = vs_parent(best, _same_values(report, points),
                                      extends=plan.sweep.extends,
                                      lower_is_better=plan.lower_is_better, confirmed=measured,
                                      objective=objective_text(plan) if plan.loads else None)
    # the key achievement: the confirmed winner (its confirmation's figures) or the best of the
    # preset's own approaches, whichever improved most; an unconfirmed point is none
    confirmed = None
    if confirmation is not None and confirmation["verdict"] == "improved":
        confirmed = {"approach": confirmation["approach"], "value": confirmation["value"],
                     "delta_pct": confirmation["delta_pct"],
                     **({"load": plan.levels[0]} if plan.loads else {}),  # the lowest level's
                     **({"metric": CAPACITY, "text": confirmation.get("text") or "",
                         "why": confirmation.get("why") or ""}
                        if plan.metric == CAPACITY else {})}
    found = [k for k in (confirmed, _unswept_key(report, plan)) if k is not None]
    report["key_achievement"] = max(found, key=lambda k: (k["delta_pct"] is None,
                                                          float(k["delta_pct"] or 0.0))) \
        if found else None


def _unswept_key(report: dict[str, Any], plan: BatchPlan) -> dict[str, Any] | None:
    """The key achievement among the preset's own approaches (no sweep point: an unconfirmed
    point is none), so that it never says "none" above an adopt step of one of them."""
    assert plan.sweep is not None
    best: dict[str, Any] | None = None
    for result in report["results"]:
        if plan.sweep.is_point(str(result["approach"])) \
                or result["verdict"] not in ("improved", "mixed"):
            continue
        levels = result.get("by_load") or [{**result, "load": None, "slo": None}]
        for level in levels:
            delta = level.get("delta_pct")
            if level.get("verdict") != "improved" or level.get("slo") == "violated" \
                    or delta is None or (best is not None and delta <= best["delta_pct"]):
                continue
            best = {"approach": result["approach"], "value": level.get("value"),
                    "delta_pct": delta,
                    **({"load": dict(level["load"])} if plan.loads and level.get("load")
                       else {})}
    return best


def _same_values(report: dict[str, Any], points: Points) -> dict[str, Any]:
    """The report as `vs_parent` reads it, each result's value the search's (the same as the
    report's without load levels)."""
    if not points.plan.loads:
        return report
    results = [{**r, "value": points.others.get(r["approach"])} for r in report["results"]]
    return {**report, "results": results}


class ConfirmationRelay:
    """The sink a confirmation batch runs with: each of its events as it is, and again as a
    `sweep.confirmation` event of the sweep batch (the inner event without its report), so that
    whoever follows the sweep (the CLI's progress, its chat thread) sees the confirmation run."""

    def __init__(self, sink: EventSink, *, sweep_batch: str) -> None:
        self._sink, self._sweep_batch = sink, sweep_batch

    def emit(self, event: Event) -> None:
        self._sink.emit(event)
        inner = {k: v for k, v in event.items() if k != "report"}
        self._sink.emit(make_event("sweep.confirmation", self._sweep_batch,
                                   confirmation=event.get("batch"), event=inner))


def add_running(
    report: dict[str, Any],
    plan: BatchPlan,
    records: list[RunRecord],
    *,
    confirming: BatchRow | None,
) -> dict[str, Any]:
    """A sweep batch without its report yet (running, or cut short): its `sweep` key from the
    points recorded so far and its confirmation as it stands, a verdict once it has one, else
    its state. An unconfirmed point is no key achievement."""
    assert plan.sweep is not None
    confirmation: dict[str, Any] | None = None
    if confirming is not None:
        point = next((c.approach for c in confirming.plan.configs if c.role != "baseline"), None)
        result = next((r for r in (confirming.report or {}).get("results", [])
                       if r["approach"] == point), None)
        confirmation = {"batch": confirming.id, "approach": point, "state": confirming.state,
                        "verdict": None if result is None else result["verdict"],
                        "value": None if result is None else result["value"],
                        "delta_pct": None if result is None else result["delta_pct"]}
    points = Points.of(plan, records)
    if confirmation is not None and confirmation["verdict"] is not None:
        return add_sweep(report, plan, points, confirmation)
    _add_section(report, plan, points, confirmation)  # no verdict: no key achievement
    return report
