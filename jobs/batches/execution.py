"""Running a stored batch to its report, one configuration after another.

`execute_batch` is what every worker runs (embedded or Celery): it is resumable — approaches
already recorded are not run again — and it stops at a cancel, recording the rest as skipped.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import socket
from collections.abc import Callable, Mapping
from typing import Any

from jobs.batches import disk_space, remembering, stacks, sweeping, upgrading, watching
from jobs.batches.bisecting import execute_bisect
from jobs.batches.config_runs import CancelWatch, closing_bracket, run_one
from jobs.batches.config_runs import log_path as log_path  # where the commands find it
from jobs.batches.evidence_step import Evidence, ahead
from jobs.batches.planning import new_batch_id, refusals
from jobs.batches.probing import execute_probe
from jobs.batches.run_events import emit_finished, phase_emitter
from jobs.core.advice import analyze, load_remedies
from jobs.core.events import EventSink, MaskedSink, make_event
from jobs.core.memory import bench_settings, dead_end_record
from jobs.core.noise import CLOSING, Spread, spread_of
from jobs.core.plans import BatchPlan, RunConfig
from jobs.core.records import RunRecord
from jobs.core.rules import RuleSet, load_rules
from jobs.core.verdicts import Metric, Verdict
from jobs.core.workloads import judge
from jobs.engines import flag_facts
from jobs.engines.base import (
    Engine,
    RunContext,
    now_iso,
    plan_secrets,
    to_run_record,
    to_stored,
)
from jobs.errors import UserError
from jobs.evidence.collectives import measure
from jobs.store import RERUN_STATUSES, BatchRow, Store


def metric_of(plan: BatchPlan) -> Metric:
    return Metric(
        name=plan.metric, min_effect_pct=plan.min_effect_pct, lower_is_better=plan.lower_is_better,
        slo=tuple(plan.slo.items()), requests=plan.requests,
    )


def build_report(
    records: list[RunRecord],
    plan: BatchPlan,
    *,
    rules: RuleSet | None = None,
    judged: Mapping[str, Verdict] | None = None,
    history: Spread | None = None,
) -> dict[str, Any]:
    """The batch's report; `judged`: the verdicts given as its runs ended (see `analyze`);
    `history`: the baseline's spread across earlier batches (`baseline_history`)."""
    return analyze(
        records, metric=metric_of(plan), rules=load_rules() if rules is None else rules,
        remedies=load_remedies(), judged=judged, flags=flag_facts(plan.engine), engine=plan.engine,
        ran=plan.ran(), history=history,
    )


def baseline_history(store: Store, row: BatchRow, records: list[RunRecord]) -> Spread | None:
    """The baseline's spread across earlier batches on this host and stack (at least 3 of them),
    where a single repetition needs it as its noise figure (docs/contracts.md "Noise,
    measured"); None otherwise, without asking the store."""
    baseline = next((r for r in records if r.role == "baseline" and r.status == "ok"), None)
    if baseline is None or min(len(r.samples(row.plan.metric)) or 2 for r in records) >= 2:
        return None
    return spread_of(store.history_points(baseline, row=row))


def execute_batch(
    batch_id: str,
    *,
    store: Store,
    sink: EventSink,
    should_stop: Callable[[], bool] | None = None,
    engine: Engine | None = None,
    engine_for: Callable[[str], Engine] | None = None,
    inline: bool = False,
    evidence: Evidence | None = None,
) -> dict[str, Any]:
    """Run (or resume) a stored batch to its end; returns the report.

    Its engine: `engine`, else `engine_for(name)` (the caller's: it keeps and closes them),
    else one made here and closed here; asked for only by a batch that runs configurations.

    A sweep's confirmation batch is run by its sweep batch (`inline`), on the same worker, right
    after the sweep; taken up on its own (a recovery sweep) it is left for the sweep to resume.
    `evidence`: the sweep's, whose probes the confirmation's configurations need again."""
    row = _row(store, batch_id)
    plan = row.plan
    sink = MaskedSink(sink, secrets=plan_secrets(plan))  # docs/contracts.md: events keep references
    if (plan.confirms is not None or plan.part_of is not None) and not inline:
        return {}  # run by the batch it belongs to (a sweep's confirmation, a bisection's part)
    if plan.bisect is not None:  # docs/contracts.md "Stacks": its parts are batches, run inline
        return execute_bisect(
            row, store=store, sink=sink, new_id=new_batch_id,
            cancelled=CancelWatch(store, batch_id, should_stop),
            execute=lambda part, relay: execute_batch(
                part, store=store, sink=relay, should_stop=should_stop, engine_for=engine_for,
                inline=True))
    if plan.is_probe:  # a queued probe: no engine, no servers (jobs.batches.probing)
        return execute_probe(row, store=store, sink=sink,
                             should_stop=CancelWatch(store, batch_id, should_stop))
    try:  # the stacks it names, from this host's file (docs/contracts.md "Stacks")
        found = stacks.resolve(plan)
    except UserError as exc:
        return _refuse(store, sink, batch_id, host=socket.gethostname(), why=str(exc),
                       what="the batch cannot run")
    with stacks.Engines(plan, found, given=engine, engine_for=engine_for) as engines:
        return _execute(row, store=store, sink=sink, should_stop=should_stop,
                        engine=engines.current, shared=evidence, other=engines.against)


def _execute(row: BatchRow, *, store: Store, sink: EventSink,
             should_stop: Callable[[], bool] | None, engine: Engine,
             shared: Evidence | None = None, other: Engine | None = None) -> dict[str, Any]:
    """`execute_batch` once its row is read, its sink masked and its engine chosen; `other`:
    the engine on the stack an upgrade check runs every configuration on again."""
    batch_id, plan = row.id, row.plan
    cancel = CancelWatch(store, batch_id, should_stop)
    host = socket.gethostname()
    done = {r.approach: r for r in store.records(batch_id) if r.status not in RERUN_STATUSES}
    bad = refusals(engine, plan)  # here, on the host whose engine will serve
    refusal = bad.get("baseline") if "baseline" not in done else None
    if refusal is not None:
        return _refuse(store, sink, batch_id, host=host, why=refusal)
    if not store.start(batch_id, host=host):
        return {}  # cancelled while queued: its canceller said so, nothing runs
    names = [c.approach for c in plan.configs]
    shown = names if other is None else upgrading.step_labels(plan)  # each server, in order
    closing = [CLOSING] if plan.is_bracketed else []  # the baseline again, last
    of = len(shown) + (plan.sweep.max_servers if plan.sweep else 0) + len(closing)  # at most
    sweep_info = None if plan.sweep is None else {
        "name": plan.sweep.name, "search": plan.sweep.search, "points": len(plan.sweep.points),
        "max_servers": plan.sweep.max_servers,
    }
    sink.emit(make_event(
        "batch.started", batch_id, host=host, queue=row.queue, approaches=[*shown, *closing],
        reps=plan.reps, warmup=plan.warmup, metric=plan.metric, warnings=list(plan.warnings),
        preset=plan.preset, sweep=sweep_info,
        confirms=plan.confirms,
    ))
    # The host probes (nvidia-smi, the engine's interpreter) run while the first server starts.
    probing = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="probe")
    fingerprint_of = probing.submit(engine.fingerprint)
    probing.shutdown(wait=False)
    baseline = done.get("baseline")
    metric, rules = metric_of(plan), load_rules()
    judged: dict[str, Verdict] = {}  # each approach judged once: for its event and the report

    def run(config: RunConfig, index: int, stop_early: sweeping.StopEarly | None = None,
            *, step: int | None = None) -> RunRecord:
        nonlocal baseline
        step = index if step is None else step  # its place among the batch's servers
        ctx = RunContext(
            batch_id=batch_id, plan=plan, log_path=log_path(batch_id, config.approach),
            fingerprint={}, should_stop=cancel, baseline=baseline, stop_early=stop_early,
            on_phase=phase_emitter(sink, batch_id, config.approach, step, of),
        )
        remembered = remembering.Recall()
        if config.role != "baseline" and not plan.rerun_known and not cancel():
            remembered = remembering.recall(store, config, batch_id=batch_id, metric=metric,
                                            rules=rules, fingerprint=fingerprint_of.result(),
                                            engine=plan.engine, bench=bench_settings(plan))
        if remembered.dead_end is not None:  # not started: the earlier failure, copied
            record = dead_end_record(remembered.dead_end, now=to_run_record(
                config, ctx, status="failed", started_at=now_iso()))
        else:
            why = bad.get(config.approach) if config.approach in names else refusals(
                engine, dataclasses.replace(plan, configs=(config,)), point=config.approach)
            record = disk_space.with_room(  # a full data dir pauses, then runs it again
                lambda: run_one(engine, config, ctx, bad=why, cancel=cancel),
                batch_id=batch_id, approach=config.approach, sink=sink, should_stop=cancel)
        if remembered.reopened is not None:
            record = dataclasses.replace(record, extra={**record.extra,
                                                        "reopened": remembered.reopened})
        if (found := evidence.of(config)) is not None:  # docs/contracts.md "Evidence for the why"
            record = dataclasses.replace(record, extra={**record.extra, "evidence": found})
        if plan.stack is not None:  # docs/contracts.md "Stacks": the stack it ran on
            record = dataclasses.replace(record, extra={**record.extra, "stack": plan.stack})
        record = to_stored(dataclasses.replace(record, fingerprint=fingerprint_of.result()), plan)
        store.put_record(record, position=index)
        current[record.approach] = record
        if config.role == "baseline":
            baseline = record
        elif baseline is not None:
            judged[record.approach] = judge(record, baseline, metric=metric, rules=rules)
        emit_finished(sink, record, verdict=judged.get(record.approach), plan=plan, metric=metric,
                      index=step, of=of)
        return record

    pending = [(i, c) for i, c in enumerate(plan.configs) if c.approach not in done]
    first = pending[0] if pending else (0, plan.baseline)  # the probe shows as its phase
    evidence = shared or Evidence(plan, probe=measure, on_phase=phase_emitter(
        sink, batch_id, first[1].approach, first[0], of))
    evidence.prepare(ahead(plan, [c for _, c in pending]))  # before the servers
    current: dict[str, RunRecord] = dict(done)  # this stack's records, as they are stored
    checked: upgrading.Against | None = None
    if other is None:
        for index, config in pending:
            run(config, index)
    else:  # an upgrade check: each configuration on both stacks, alternating which goes first
        checked = upgrading.Against(
            plan=plan, engine=other, store=store, sink=sink, batch_id=batch_id,
            bad=refusals(other, plan), log_path=log_path, metric=metric, rules=rules, of=of,
            run_one=lambda e, c, ctx, why: run_one(e, c, ctx, bad=why, cancel=cancel),
        ).start()
        for step, (index, config, which) in enumerate(upgrading.steps(plan)):
            if which == upgrading.CURRENT and config.approach not in done:
                run(config, index, step=step)
            elif which == upgrading.AGAINST and config.approach not in checked.done:
                checked.run(config, position=index, step=step, current=current, cancel=cancel)
    points = sweeping.Points.of(plan, store.records(batch_id) if plan.sweep else [])
    if plan.sweep is not None:
        sweeping.run_points(plan, batch_id=batch_id, points=points, run=run, stop=cancel)
    if closing and baseline is not None and not cancel():
        if (bracketed := closing_bracket(engine, plan, baseline, store=store, sink=sink,
                                         cancel=cancel, of=of, metric=metric)) is not None:
            baseline = bracketed
            judged.clear()  # every approach is judged again, against both of the baseline's runs
    records = store.records(batch_id)
    if (history := baseline_history(store, row, records)) is not None:
        judged.clear()  # a single repetition is judged again, against the baseline's history
    report = build_report(records, plan, rules=rules, judged=judged, history=history)
    if checked is not None:  # docs/contracts.md "Stacks": the upgrade, judged
        report["upgrade"] = checked.section(current=stacks.current_label(plan))
    if plan.confirms is not None:  # one experiment with its sweep (docs/contracts.md)
        report["confirms"] = plan.confirms
    if plan.sweep is not None:
        point = sweeping.winner(plan, points)
        confirmation = None if point is None or cancel() else sweeping.confirm(
            plan, row, point, store=store, new_id=new_batch_id,
            execute=lambda confirm_id: execute_batch(
                confirm_id, store=store, should_stop=should_stop, engine=engine, inline=True,
                evidence=evidence,
                sink=sweeping.ConfirmationRelay(sink, sweep_batch=batch_id)),
        )
        report = sweeping.add_sweep(report, plan, points, confirmation)
    if plan.watch is not None:  # docs/contracts.md "Regression watch"
        report["watch"] = plan.watch
        if plan.confirms is None and not cancel():
            report["watch_changes"] = watching.judge_night(
                plan, row=row, records=records, store=store, host=host, new_id=new_batch_id,
                execute=lambda confirm_id: execute_batch(
                    confirm_id, store=store, should_stop=should_stop, engine=engine,
                    inline=True, evidence=evidence,
                    sink=sweeping.ConfirmationRelay(sink, sweep_batch=batch_id)))
    state = "cancelled" if cancel.requested else "done"
    report["state"] = state
    if not store.end(batch_id, state, report=report):
        return {}  # ended meanwhile by its canceller or a recovery: said once, by them
    kind = "batch.cancelled" if state == "cancelled" else "batch.finished"
    sink.emit(make_event(kind, batch_id, state=state, report=report))
    return report


def _refuse(store: Store, sink: EventSink, batch_id: str, *, host: str, why: str,
            what: str = "the baseline cannot start") -> dict[str, Any]:
    """End a batch whose baseline (or stack) this host cannot start: state `refused`, nothing
    started."""
    error = f"{what} on {host}: {why}"
    if not store.end(batch_id, "refused", host=host, error=error[:500]):
        return {}  # cancelled while queued: it stays so
    sink.emit(make_event("batch.finished", batch_id, state="refused", report=None,
                         error=error[:500], host=host))
    return {}


def _row(store: Store, batch_id: str) -> BatchRow:
    row = store.get_batch(batch_id)
    if row is None:
        raise UserError(f"unknown batch {batch_id!r}")
    return row
