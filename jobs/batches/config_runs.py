"""One configuration's run in a batch: its log's path, the cancel it watches for, its server
starts (`starts`, docs/contracts.md "Noise, measured"), and the baseline's closing bracket run
after every other configuration. `jobs.batches.execution` runs them in the batch's order."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jobs import settings
from jobs.batches.run_events import emit_finished, phase_emitter
from jobs.core.events import EventSink
from jobs.core.file_names import file_stem
from jobs.core.noise import CLOSING, merge_starts, spread_reps
from jobs.core.plans import BatchPlan, RunConfig
from jobs.core.records import RunRecord
from jobs.core.verdicts import Metric
from jobs.engines.base import Engine, PhaseCallback, RunContext, now_iso, to_run_record, to_stored
from jobs.store import Store

CANCEL_POLL_S = 0.5


def log_path(batch_id: str, approach: str) -> Path:
    return settings.data_dir().resolve() / "logs" / batch_id / f"{file_stem(approach)}.log"


class CancelWatch:
    """Cancel requests from the caller or the store, polled at most every CANCEL_POLL_S."""

    def __init__(self, store: Store, batch_id: str, extra: Callable[[], bool] | None) -> None:
        self._store, self._batch_id, self._extra = store, batch_id, extra
        self._checked_at = 0.0
        self.requested = False

    def __call__(self) -> bool:
        if self.requested:
            return True
        if self._extra is not None and self._extra():
            self.requested = True
        elif time.monotonic() - self._checked_at >= CANCEL_POLL_S:
            self._checked_at = time.monotonic()
            self.requested = self._store.is_cancel_requested(self._batch_id)
        return self.requested


def run_one(
    engine: Engine, config: RunConfig, ctx: RunContext, *, bad: str | None, cancel: CancelWatch
) -> RunRecord:
    started = now_iso()
    if cancel():
        return to_run_record(config, ctx, status="skipped", started_at=started)
    if bad is not None:
        ctx.on_phase("preflight", {"error": bad})
        return to_run_record(config, ctx, status="failed", started_at=started, exit_code=2,
                             log_tail=bad)
    ctx.on_phase("preflight", {})
    return run_starts(engine, config, ctx)


def run_starts(engine: Engine, config: RunConfig, ctx: RunContext) -> RunRecord:
    """The configuration's run: one server start, or with the plan's `starts` its repetitions
    spread over that many starts, one after another, each with its own log, the record merged
    (docs/contracts.md "Noise, measured"). A start that does not end well ends the run."""
    shares = spread_reps(ctx.plan.reps, ctx.plan.starts)
    if len(shares) == 1:
        return engine.run(config, ctx)
    records: list[RunRecord] = []
    stem = ctx.log_path.name.removesuffix(".log")
    for number, reps in enumerate(shares, start=1):
        each = dataclasses.replace(
            ctx, plan=dataclasses.replace(ctx.plan, reps=reps),
            log_path=ctx.log_path if number == 1 else ctx.log_path.with_name(
                f"{stem}.start{number}.log"),
            on_phase=_with_start(ctx.on_phase, number=number, of=len(shares)))
        records.append(engine.run(config, each))
        if records[-1].status != "ok":
            break
    return merge_starts(records)


def _with_start(on_phase: PhaseCallback, *, number: int, of: int) -> PhaseCallback:
    def tagged(phase: str, details: dict[str, Any]) -> None:
        on_phase(phase, {**details, "start": number, "starts": of})
    return tagged


def closing_bracket(
    engine: Engine, plan: BatchPlan, baseline: RunRecord, *, store: Store, sink: EventSink,
    cancel: CancelWatch, of: int, metric: Metric,
) -> RunRecord | None:
    """The baseline run again after every other configuration, kept in the baseline's record
    as its `bracket` (docs/contracts.md "Noise, measured"); None when it already has one, or
    the first run did not measure (nothing to bracket)."""
    if "bracket" in baseline.extra or baseline.status != "ok":
        return None
    config = plan.baseline
    ctx = RunContext(
        batch_id=baseline.batch, plan=plan, log_path=log_path(baseline.batch, "baseline.last"),
        fingerprint={}, should_stop=cancel,
        on_phase=phase_emitter(sink, baseline.batch, CLOSING, of - 1, of),
    )
    ctx.on_phase("preflight", {})
    closing = run_starts(engine, config, ctx)
    found: dict[str, Any] = {"metrics": closing.metrics, "status": closing.status,
                             "started_at": closing.started_at, "finished_at": closing.finished_at}
    found.update({k: closing.extra[k] for k in ("by_load", "by_category", "starts",
                                                "repetitions", "capacity")
                  if k in closing.extra})
    record = to_stored(dataclasses.replace(baseline, extra={**baseline.extra, "bracket": found}),
                       plan)
    store.put_record(record, position=0)
    emit_finished(sink, dataclasses.replace(closing, approach=CLOSING, role="baseline"),
                  verdict=None, plan=plan, metric=metric, index=of - 1, of=of)
    return record
