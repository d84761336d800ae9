"""The local engine's load levels (docs/contracts.md "Load levels and service-level objectives").

The child serves `max-concurrency` requests at once (`jobs.engines.local.serving`): plain greedy
decoding as one batch, assisted and prompt-lookup decoding one after another (batch size 1 in
transformers). A preset's `loads: {max-concurrency: [...]}` runs every level in one child, so
the model is built once; this module turns what the child reported into the record's figures
and `by_load`. It has no request rate: `loads: {request-rate: [...]}` is refused before any run.

A capacity search (docs/contracts.md "Capacity under the SLO") runs in the child too: it asks
jobs.core.capacity for each next concurrency from the levels it measured (and those a checkpoint
held, `--capacity-done`), and this module turns its levels into the record's `capacity`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobs.core.capacity import MAX_LEVELS, Spec, measured, section, shown_metric
from jobs.core.plans import BatchPlan
from jobs.engines.base import RunContext
from jobs.engines.local.child import PROG
from jobs.engines.local.serving import LATENCY_KEYS

LOAD_KNOB = "max-concurrency"
THROUGHPUT_KEYS = ("output_throughput", "total_throughput")


@dataclass
class LevelProgress:
    """What the child reported at one level: its warm-up, figures per repetition (every number
    of its `result` events, by key) and the largest batch one generate() call served."""

    load: dict[str, Any]
    warmup: dict[str, Any] | None = None
    figures: dict[str, list[float]] = field(default_factory=dict)
    batch_size: int = 0


@dataclass
class Progress:
    """What the child has reported so far: a level per `level` event (one without loads)."""

    ready: bool = False
    levels: list[LevelProgress] = field(default_factory=list)
    done: dict[str, Any] | None = None
    lossy: bool = False  # a LosslessnessError: no level's figures count
    bench_refused: bool = False  # the model served; the bench refused its own settings
    # Resume at the level reached: the levels a checkpoint held (`by_load` entries, lowest
    # first; the child runs the others), the plan's number of levels, each finished level's
    # accept length, and what to do when one is finished (write the checkpoint).
    restored: list[dict[str, Any]] = field(default_factory=list)
    total: int = 1
    accepts: list[float | None] = field(default_factory=list)
    on_level_done: Callable[[Progress], None] | None = None

    @property
    def level(self) -> LevelProgress:
        if not self.levels:
            self.levels.append(LevelProgress(load={}))
        return self.levels[-1]


def handle_event(event: dict[str, Any], progress: Progress, ctx: RunContext) -> None:
    """Follow one of the child's events: the progress it makes, the phase it is in."""
    kind = event["event"]
    load = event.get("load")
    tag: dict[str, Any] = {"load": load} if isinstance(load, dict) else {}
    if kind == "ready":
        progress.ready = True
        ctx.on_phase("ready", {})
    elif kind == "level" and tag:
        progress.levels.append(LevelProgress(load=tag["load"]))
        searching = event.get("search") == "capacity"  # the child numbers them all itself
        index = int(event.get("level") or 1) + (0 if searching else len(progress.restored))
        ctx.on_phase("level", {**tag, "level": index, "levels": progress.total,
                               **({"search": "capacity"} if searching else {})})
    elif kind == "level_done":
        accept = event.get("accept_length")
        progress.accepts.append(float(accept) if isinstance(accept, int | float) else None)
        if progress.on_level_done is not None:
            progress.on_level_done(progress)
    elif kind == "warmup":
        ctx.on_phase("warmup", {"of": event.get("of"), **tag})
    elif kind == "repetition":
        ctx.on_phase("repetition", {"rep": event.get("rep"), "of": event.get("of"), **tag})
    elif kind == "result":
        level = progress.level
        figures = {k: float(event[k]) for k in ("output_throughput", "total_throughput")}
        details: dict[str, Any] = {"rep": event.get("rep"), "of": ctx.plan.reps,
                                   "metric": shown_metric(ctx.plan.metric),
                                   "value": figures.get(shown_metric(ctx.plan.metric))}
        level.batch_size = max([level.batch_size, *event.get("batch_sizes", [])])
        if event.get("warmup"):
            counts: dict[str, Any] = {k: event[k] for k in ("tokens", "seconds", "completed")
                                      if k in event}
            level.warmup = {**figures, **counts}
            details["warmup"] = True
        else:
            for key, value in event.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    level.figures.setdefault(key, []).append(float(value))
        ctx.on_phase("result", {**details, **tag})
    elif kind == "done":
        progress.done = event
    elif kind == "lossy":
        progress.lossy = True
    elif kind == "bench_refused":
        progress.bench_refused = True


def loads_reason(loads: Mapping[str, Sequence[Any]] | None,
                 capacity: Mapping[str, Any] | None = None) -> str | None:
    """Why the child cannot run a plan's `loads` or capacity search (one line, argparse's
    words); None when it can."""
    if capacity is not None and capacity.get("knob") != LOAD_KNOB:
        return (f"{PROG}: error: unrecognized arguments: --{capacity.get('knob')} (the local "
                f"engine serves up to {LOAD_KNOB} requests at once, in waves, and has no "
                f"arrival rate: use capacity: {{knob: {LOAD_KNOB}, ...}})")
    if not loads or LOAD_KNOB in loads:
        return None
    knob = next(iter(loads))
    return (f"{PROG}: error: unrecognized arguments: --{knob} (the local engine serves up to "
            f"{LOAD_KNOB} requests at once, in waves, and has no arrival rate: use loads: "
            f"{{{LOAD_KNOB}: [...]}})")


def kept_keys(plan: BatchPlan) -> tuple[str, ...]:
    """The figures a record keeps per repetition: the throughputs, and the latencies whenever
    the batch has load levels or an SLO (a batch with neither keeps its record as it was)."""
    return THROUGHPUT_KEYS + (LATENCY_KEYS if plan.loads or plan.slo else ())


def level_metrics(
    plan: BatchPlan, level: LevelProgress, accept_length: float | None
) -> dict[str, Any]:
    """One level's `metrics`, shaped as a record's: a list per key, and its accept length."""
    metrics: dict[str, Any] = {k: list(level.figures.get(k, [])) for k in kept_keys(plan)}
    metrics["accept_length"] = accept_length
    return metrics


def level_entry(
    plan: BatchPlan, level: LevelProgress, accept: float | None, status: str
) -> dict[str, Any]:
    """One level as the record's `by_load` (and the checkpoint) keeps it."""
    return {"load": dict(level.load), "metrics": level_metrics(plan, level, accept),
            "status": status, "warmup": level.warmup, "batch_size": level.batch_size or None}


def finished(plan: BatchPlan, progress: Progress) -> list[dict[str, Any]]:
    """The levels done: the checkpoint's, then each the child has finished."""
    done = zip(progress.levels, progress.accepts, strict=False)
    return [*progress.restored, *(level_entry(plan, level, accept, "ok") for level, accept in done)]


def capacity_record(plan: BatchPlan, progress: Progress, *, status: str) -> dict[str, Any]:
    """The record's `capacity`: the checkpoint's levels, then the child's, in the order they
    ran; each level the child finished is `ok`, the one it was in when the run ended has the
    run's status. An output that is not the baseline's fails every level."""
    assert plan.capacity is not None
    finished = len(progress.accepts)
    entries: list[dict[str, Any]] = [dict(entry) for entry in progress.restored]
    for index, level in enumerate(progress.levels):
        done = index < finished
        state = "failed" if progress.lossy else "ok" if done else (
            status if status != "ok" else "failed")
        entries.append(level_entry(plan, level, progress.accepts[index] if done else None,
                                   state))
    return section(Spec.of(plan.capacity), entries, plan.slo)


def capacity_argv(plan: BatchPlan, restored: Sequence[Mapping[str, Any]]) -> list[str]:
    """The child's search flags (jobs.engines.local.searching): its range, its limits, and each
    level a checkpoint held as `--capacity-done` LOAD:1 (held the SLO) or LOAD:0; [] without a
    capacity search."""
    if plan.capacity is None:
        return []
    knob = str(plan.capacity["knob"])
    argv = ["--capacity", f"{plan.capacity['from']},{plan.capacity['max']}",
            "--slo", ",".join(f"{k}={v}" for k, v in plan.slo.items())]
    held = [(entry["load"][knob], measured(entry["load"][knob], entry.get("metrics") or {},
                                           plan.slo).holds) for entry in restored]
    if held:
        argv += ["--capacity-done", ",".join(f"{load}:{int(holds)}" for load, holds in held)]
    return argv


SEARCH_LEVELS = MAX_LEVELS
"""A capacity search's levels, as its phases count them: at most this many."""


def by_load(plan: BatchPlan, progress: Progress, *, status: str) -> list[dict[str, Any]]:
    """Every level of the plan, lowest first, as the record's `by_load` keeps it: the
    checkpoint's levels, then the child's. The run ended at the last level it reached: that
    level has the run's status, the ones before it `ok`, the ones after it `skipped`
    (`cancelled` after a cancel). An output that is not the baseline's (or differs between
    levels) fails every level: no figure of it counts."""
    skip = len(progress.restored)
    reached, accepts = progress.levels, progress.accepts
    ended = skip + max(len(reached) - 1, 0)
    after = "cancelled" if status == "cancelled" else "skipped"
    levels: list[dict[str, Any]] = []
    for index, load in enumerate(plan.levels):
        if status == "ok" or index < ended:
            state = "failed" if progress.lossy else "ok"
        elif index == ended:
            state = status
        else:
            state = after
        if index < skip:
            levels.append({**progress.restored[index], "status": state})
            continue
        mine = index - skip
        level = reached[mine] if mine < len(reached) else LevelProgress(load=dict(load))
        accept = accepts[mine] if mine < len(accepts) else None
        levels.append(level_entry(plan, level, accept, state))
    return levels
