"""A bisection over the host's stacks (docs/contracts.md "Stacks", bisect), run by the worker that
takes its batch: the first stack, between a good one and a bad one, where a configuration's
change appears.

The bisect batch runs no server itself. It reads every stack of its engine from the host's file,
fingerprints each with its own interpreter (its engine's version: the order), and runs its
probes as batches of their own, inline, one stack each (`part_of` it: the preset's baseline and
the configuration, on that stack), at most ceil(log2(n)) of them for n candidates
(jobs.core.stacks.Bisection). Without the values before and after the change, one upgrade check
of the two ends comes first (`--stack GOOD --against BAD`): it says whether there is a change at
all, and its two values. Its report is the bisection's (`"bisect"`), not a batch's.

A watch's change (`bisect WATCH`) brings its ends as the watch saw them, fingerprints: the host's
stacks between them are found here (`host_span`, jobs.core.stacks.watch_span), and each stack's
value is the watch's key, configuration and load level as the watch's series measures it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import socket
from collections.abc import Callable
from typing import Any

from jobs.batches import stacks
from jobs.core.engine_info import describe
from jobs.core.events import Event, EventSink, make_event
from jobs.core.plans import BatchPlan, BatchRow, load_label
from jobs.core.records import RunRecord
from jobs.core.stacks import (
    Bisection,
    Span,
    by_values,
    diff_text,
    load_stacks,
    need_stacks,
    needed,
    order_stacks,
    stack_diff,
    watch_span,
)
from jobs.core.stacks import between as stacks_between
from jobs.core.verdicts import is_better
from jobs.core.watch import SeriesKey, judged_keys, points_of
from jobs.engines.stack_check import check_stack
from jobs.errors import UserError
from jobs.store import TERMINAL_STATES, Store
from jobs.store.experiments import part_key

Execute = Callable[[str, EventSink], dict[str, Any]]  # a part's batch id and sink -> its report


class PartRelay:
    """The sink a bisection's part runs with: each of its events as it is, and again as a
    `bisect.part` event of the bisect batch, so that whoever follows the bisection sees it."""

    def __init__(self, sink: EventSink, *, batch: str, stack: str) -> None:
        self._sink, self._batch, self._stack = sink, batch, stack

    def emit(self, event: Event) -> None:
        self._sink.emit(event)
        inner = {k: v for k, v in event.items() if k != "report"}
        self._sink.emit(make_event("bisect.part", self._batch, part=event.get("batch"),
                                   stack=self._stack, event=inner))


def execute_bisect(row: BatchRow, *, store: Store, sink: EventSink, execute: Execute,
                   new_id: Callable[[], str], cancelled: Callable[[], bool]) -> dict[str, Any]:
    """Run (or resume) a bisect batch to its report."""
    plan, host = row.plan, socket.gethostname()
    asked = dict(plan.bisect or {})
    span: Span | None = None
    try:
        if is_watch_bisect(asked):  # `bisect WATCH`: the ends are the watch's points' stacks
            span = host_span(plan, asked)
            fingerprints = {name: dict(fp) for name, fp in span.stacks.items()}
            names = list(span.candidates)
            asked.update({"from": span.good, "to": span.bad})
        else:
            fingerprints, names = candidates(plan, good=asked["from"], bad=asked["to"])
    except UserError as exc:
        error = f"the bisection cannot run on {host}: {exc}"[:500]
        if store.end(row.id, "refused", host=host, error=error):  # not one cancelled meanwhile
            sink.emit(make_event("batch.finished", row.id, state="refused", report=None,
                                 error=error, host=host))
        return {}
    if not store.start(row.id, host=host):
        return {}  # cancelled while queued: its canceller said so, nothing runs
    sink.emit(make_event("batch.started", row.id, host=host, queue=row.queue, approaches=[],
                         reps=plan.reps, warmup=plan.warmup, metric=plan.metric,
                         warnings=list(plan.warnings), preset=plan.preset, sweep=None,
                         confirms=None, bisect={**asked, "stacks": names[:-1]}))
    found: dict[str, Any] = {**asked, "approach": asked["approach"], "metric": plan.metric,
                             "stacks": names[:-1], "measured": [],
                             "ends": None, "first": None, "text": "", "needs": None}
    part = _Parts(row, store=store, sink=sink, execute=execute, new_id=new_id)
    before, after = asked.get("before"), asked.get("after")
    if before is None or after is None:
        ends = part.ends(good=asked["from"], bad=asked["to"])
        found["ends"] = ends
        if ends["outcome"] not in ("faster", "slower"):
            found["text"] = (f"no change of {asked['approach']} between {asked['from']} and "
                             f"{asked['to']} to bisect ({ends['outcome']}: {ends['why']})")
            return _finish(row, store=store, sink=sink, found=found, cancelled=cancelled())
        before, after = ends["before"], ends["after"]
        found.update(before=before, after=after)
    judge = by_values(before=float(before), after=float(after))
    state = Bisection(tuple(names))
    found["max_batches"] = state.max_batches
    while (stack := state.next_stack()) is not None and not cancelled():
        value, batch = part.value_on(stack)
        found["measured"].append({"stack": stack, "batch": batch, "value": value,
                                  "has_change": None if value is None else judge(value)})
        if value is None:
            break
        state = state.measured(stack, has_change=judge(value))
    if asked.get("direction") is not None:  # a watch's change: its key's own way
        worse = asked["direction"] == "regression"
    else:
        worse = not is_better(float(after), float(before), lower_is_better=plan.lower_is_better)
    found["direction"] = "slower" if worse else "faster"
    if state.first is not None:
        previous = state.before(asked["from"])
        diff = stack_diff(fingerprints[previous], fingerprints[state.first], engine=plan.engine)
        found.update(first=state.first, previous=previous, diff=diff)
        found["text"] = f"first {found['direction']} on {state.first}: {diff_text(diff)}"
        if len(names) == 1:
            version_of = describe(plan.engine).version_key
            found["needs"] = span.needs if span is not None else needed(
                diff, version_of=version_of)
            found["text"] = (f"no stacks between {asked['from']} and {asked['to']}: the change "
                             f"came between them ({diff_text(diff)}); to narrow it down this "
                             f"host would need {found['needs']}")
    else:
        found["text"] = "the bisection stopped before it found the first stack with the change"
    return _finish(row, store=store, sink=sink, found=found, cancelled=cancelled())


def is_watch_bisect(asked: dict[str, Any]) -> bool:
    """A bisection of a watch's change (`bisect WATCH`), not one between two named stacks."""
    return asked.get("change") is not None


def host_span(plan: BatchPlan, asked: dict[str, Any]) -> Span:
    """A watch's change (`Change.bisect()`) among this host's stacks of the plan's engine, each
    fingerprinted by its own interpreter; a host without a stacks file has none between."""
    found = load_stacks()
    specs = [] if found is None else found.of_engine(plan.engine)
    key = describe(plan.engine).version_key or plan.engine
    fingerprints = {s.name: stacks.engine_on(plan.engine, s).fingerprint() for s in specs}
    versions = {name: fp.get(key) for name, fp in fingerprints.items()}
    return watch_span(order_stacks(specs, versions=versions), fingerprints=fingerprints,
                      asked=asked, engine=plan.engine)


def candidates(plan: BatchPlan, *, good: str, bad: str
                ) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Each stack's fingerprint (its own interpreter's) and the candidates after `good` up to
    `bad`, in version order."""
    found = need_stacks(f"bisect --from {good} --to {bad}")
    for name in (good, bad):
        check_stack(found.get(name, engine=plan.engine))
    key = describe(plan.engine).version_key or plan.engine
    fingerprints = {s.name: stacks.engine_on(plan.engine, s).fingerprint()
                    for s in found.of_engine(plan.engine)}
    versions = {name: fp.get(key) for name, fp in fingerprints.items()}
    ordered = order_stacks(found.of_engine(plan.engine), versions=versions)
    inside = stacks_between(ordered, good=good, bad=bad, versions=versions)
    return fingerprints, [s.name for s in inside]


class _Parts:
    """The bisection's batches: made once each (found again when the bisection resumes), run
    inline on this worker."""

    def __init__(self, row: BatchRow, *, store: Store, sink: EventSink, execute: Execute,
                 new_id: Callable[[], str]) -> None:
        self.row, self.store, self.sink = row, store, sink
        self.execute, self.new_id = execute, new_id

    def _report(self, plan: BatchPlan, *, key: str, stack: str) -> tuple[str, dict[str, Any]]:
        made, _ = self.store.create_batch(
            batch_id=self.new_id(), preset=plan.preset, engine=plan.engine, queue=plan.queue,
            requested_by=self.row.requested_by, plan=plan, channel=None,
            idempotency_key=part_key(self.row.id, key))
        if made.state in TERMINAL_STATES and made.report:
            return made.id, made.report
        return made.id, self.execute(made.id, PartRelay(self.sink, batch=self.row.id,
                                                        stack=stack)) or {}

    def _plan(self, **fields: Any) -> BatchPlan:
        return dataclasses.replace(self.row.plan, bisect=None, part_of=self.row.id, **fields)

    def value_on(self, stack: str) -> tuple[float | None, str]:
        """The configuration's median on `stack` (None: it measured nothing), and its batch: on
        the preset's metric, or on a watch's key and load level as the watch measures it."""
        approach = self.row.plan.configs[-1].approach
        batch, report = self._report(self._plan(stack=stack), key=stack, stack=stack)
        asked = self.row.plan.bisect or {}
        if is_watch_bisect(asked):
            return watched_value(self.row.plan, self.store.records(batch), asked=asked), batch
        if approach == "baseline" or self.row.plan.configs[-1].role == "baseline":
            value = (report.get("baseline") or {}).get("value")
        else:
            value = next((r.get("value") for r in report.get("results") or []
                          if r.get("approach") == approach), None)
        return (float(value) if isinstance(value, int | float) else None), batch

    def ends(self, *, good: str, bad: str) -> dict[str, Any]:
        """The configuration on both ends, as one upgrade check: its outcome and two values."""
        approach = self.row.plan.configs[-1].approach
        batch, report = self._report(self._plan(stack=good, against=bad), key="ends",
                                     stack=f"{good} and {bad}")
        result = next((r for r in (report.get("upgrade") or {}).get("results") or []
                       if r.get("approach") == approach), None)
        if result is None:
            return {"batch": batch, "outcome": "cancelled", "why": "it did not run",
                    "before": None, "after": None}
        return {"batch": batch, "outcome": result["outcome"], "why": result["why"],
                "before": result["before"], "after": result["value"]}


def watched_value(plan: BatchPlan, records: list[RunRecord], *,
                  asked: dict[str, Any]) -> float | None:
    """The median of the watch's key, configuration and load level in a part's records, as the
    watch's series holds it (None: not measured)."""
    keys = judged_keys(metric=plan.metric, lower_is_better=plan.lower_is_better,
                       slo=tuple(plan.slo))
    wanted = SeriesKey(str(asked["approach"]), str(asked["key"]), str(asked.get("load") or ""))
    points = points_of(records, keys=keys, at=dt.datetime.now(dt.UTC), stack_of=lambda r: {},
                       load_label=load_label)
    return next((p.value for p in points if p.key == wanted), None)


def _finish(row: BatchRow, *, store: Store, sink: EventSink, found: dict[str, Any],
            cancelled: bool) -> dict[str, Any]:
    found["batches"] = len(found["measured"]) + (1 if found.get("ends") else 0)
    state = "cancelled" if cancelled else "done"
    report = {"batch": row.id, "preset": row.preset, "engine": row.engine,
              "metric": row.plan.metric, "bisect": found, "state": state}
    if not store.end(row.id, state, report=report):
        return {}  # ended meanwhile by its canceller or a recovery: said once, by them
    kind = "batch.cancelled" if cancelled else "batch.finished"
    sink.emit(make_event(kind, row.id, state=state, report=report))
    return report
