"""An upgrade check's runs on the stack it checks (docs/contracts.md "Stacks"): `run PRESET
--against NAME` runs every configuration on the batch's own stack and again on NAME, one server
at a time, alternating which goes first from one configuration to the next (old, new; new, old;
...) so that a host drifting during the batch moves both sides alike.

Records: the batch's own stack keeps its records as any batch does (exactly one baseline); the
records on NAME are stored beside them under the stack's name (`Store.put_record(stack=NAME)`,
the runs table's `stack`), each with `"stack": NAME`. Memory holds per stack as before: a
configuration known to fail on NAME is not started there, one known to fail on the current
stack is tried on NAME. The report's `upgrade` judges each configuration on NAME against itself
on the current stack (jobs.core.stacks).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.batches import disk_space, remembering
from jobs.batches.run_events import emit_finished, phase_emitter
from jobs.core.events import EventSink
from jobs.core.memory import bench_settings, dead_end_record
from jobs.core.plans import BatchPlan, RunConfig
from jobs.core.records import RunRecord
from jobs.core.rules import RuleSet
from jobs.core.stacks import judge_upgrade, upgrade_section
from jobs.core.verdicts import Metric
from jobs.engines.base import Engine, RunContext, now_iso, to_run_record, to_stored
from jobs.store import RERUN_STATUSES, Store

CURRENT, AGAINST = "current", "against"
RunOne = Callable[[Engine, RunConfig, RunContext, str | None], RunRecord]


def label(approach: str, stack: str) -> str:
    """How progress and events name a configuration's run on the checked stack."""
    return f"{approach} on {stack}"


def steps(plan: BatchPlan) -> list[tuple[int, RunConfig, str]]:
    """Every server of the check in the order it runs: (the configuration's position, it,
    CURRENT or AGAINST), alternating which stack goes first."""
    out: list[tuple[int, RunConfig, str]] = []
    for index, config in enumerate(plan.configs):
        pair = [CURRENT, AGAINST] if index % 2 == 0 else [AGAINST, CURRENT]
        out += [(index, config, which) for which in pair]
    return out


def step_labels(plan: BatchPlan) -> list[str]:
    assert plan.against is not None
    return [c.approach if which == CURRENT else label(c.approach, plan.against)
            for _, c, which in steps(plan)]


@dataclass
class Against:
    """The runs on the checked stack: its engine, what its preflight refuses, its fingerprint
    (read from its own interpreter while the first server starts) and its records so far."""

    plan: BatchPlan
    engine: Engine
    store: Store
    sink: EventSink
    batch_id: str
    bad: dict[str, str]
    log_path: Callable[[str, str], Path]
    run_one: RunOne
    metric: Metric
    rules: RuleSet
    of: int
    done: dict[str, RunRecord] = field(default_factory=dict)
    _fingerprint: concurrent.futures.Future[dict[str, Any]] | None = None

    @property
    def name(self) -> str:
        assert self.plan.against is not None
        return self.plan.against

    def start(self) -> Against:
        self.done = {r.approach: r for r in self.store.records(self.batch_id, stack=self.name)
                     if r.status not in RERUN_STATUSES}
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="probe")
        self._fingerprint = pool.submit(self.engine.fingerprint)
        pool.shutdown(wait=False)
        return self

    def fingerprint(self) -> dict[str, Any]:
        assert self._fingerprint is not None
        return self._fingerprint.result()

    def run(self, config: RunConfig, *, position: int, step: int,
            current: Mapping[str, RunRecord], cancel: Callable[[], bool]) -> RunRecord:
        """One configuration on the checked stack, stored under its name; its event's verdict
        is the upgrade's when the current stack's run is in."""
        shown = label(config.approach, self.name)
        ctx = RunContext(
            batch_id=self.batch_id, plan=self.plan, log_path=self.log_path(self.batch_id, shown),
            fingerprint={}, should_stop=cancel,
            on_phase=phase_emitter(self.sink, self.batch_id, shown, step, self.of))
        remembered = remembering.Recall()
        if not self.plan.rerun_known and not cancel():
            remembered = remembering.recall(
                self.store, config, batch_id=self.batch_id, metric=self.metric,
                rules=self.rules, fingerprint=self.fingerprint(), engine=self.plan.engine,
                bench=bench_settings(self.plan))
        if remembered.dead_end is not None:
            record = dead_end_record(remembered.dead_end, now=to_run_record(
                config, ctx, status="failed", started_at=now_iso()))
        else:
            why = self.bad.get(config.approach)
            record = disk_space.with_room(
                lambda: self.run_one(self.engine, config, ctx, why),
                batch_id=self.batch_id, approach=shown, sink=self.sink, should_stop=cancel)
        extra = {**record.extra, "stack": self.name}
        if remembered.reopened is not None:
            extra["reopened"] = remembered.reopened
        record = to_stored(dataclasses.replace(record, fingerprint=self.fingerprint(),
                                               extra=extra), self.plan)
        self.store.put_record(record, position=position, stack=self.name)
        self.done[record.approach] = record
        ours = current.get(record.approach)
        verdict = None if ours is None else judge_upgrade(
            ours, record, metric=self.metric, rules=self.rules, engine=self.plan.engine)
        emit_finished(self.sink, dataclasses.replace(record, approach=shown, role="approach"),
                      verdict=verdict, plan=self.plan, metric=self.metric, index=step,
                      of=self.of)
        return record

    def section(self, *, current: str) -> dict[str, Any]:
        """The report's `upgrade`, from both stacks' stored records."""
        return upgrade_section(
            self.store.records(self.batch_id), self.store.records(self.batch_id, stack=self.name),
            metric=self.metric, rules=self.rules, engine=self.plan.engine, current=current,
            against=self.name)
