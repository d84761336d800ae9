"""How long a batch will take, from how long the same preset's configurations took before.

A batch is a sequence of configurations, each a server start and some bench passes (the
warm-up and the repetitions), so the unit of history is one configuration's run, not a whole
batch: batches of one preset differ in size (a retry of two configurations, a confirmation
batch, `--reps`), and a median over whole batches gives a full batch the estimate of a short
one. A configuration that ran as many passes as the plan asks is taken as it is; otherwise
the median time per pass scales to the plan's. What runs now is estimated as its configuration
less the time it has run; past its estimate, it is overdue (never a negative or made-up small
number); with no history there is no estimate at all.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from jobs.core.plans import BatchPlan
from jobs.core.records import RunRecord


@dataclass(frozen=True)
class PastRun:
    """One configuration's run in an earlier batch: how long it took, how many bench passes."""

    seconds: float
    passes: int


@dataclass(frozen=True)
class Estimate:
    """Seconds until a batch ends; `overdue_s`: how far the configuration running now is past
    its own estimate (then `left_s` counts only the configurations after it)."""

    left_s: float
    overdue_s: float | None = None
    remaining: int = 0  # configurations not yet ended, the running one included


def passes_of(plan: BatchPlan, *, reps: int | None = None) -> int:
    """Bench passes of one configuration of `plan`: its repetitions and the warm-up."""
    return (plan.reps if reps is None else reps) + (1 if plan.warmup else 0)


def to_past_run(record: RunRecord) -> PastRun | None:
    """A finished configuration's duration and passes; None for one that says nothing about
    a full run (not ok, no times, no pass)."""
    began, ended = to_time(record.started_at), to_time(record.finished_at)
    if record.status != "ok" or began is None or ended is None or ended <= began:
        return None
    reps = record.extra.get("repetitions")
    runs = len(reps) if isinstance(reps, list) else max(
        (len(v) for v in record.metrics.values() if isinstance(v, list)), default=0)
    passes = runs + (1 if record.warmup is not None else 0)
    return PastRun((ended - began).total_seconds(), passes) if passes else None


def configuration_s(history: Sequence[PastRun], *, passes: int) -> float | None:
    """One configuration of `passes` bench passes: the median of the past runs with as many,
    else the median seconds per pass times `passes`; None without history."""
    same = [run.seconds for run in history if run.passes == passes]
    if same:
        return statistics.median(same)
    if not history:
        return None
    return statistics.median(run.seconds / run.passes for run in history) * passes


def planned(plan: BatchPlan) -> list[int]:
    """Each configuration the batch may run, as its bench passes: the configurations, a sweep's
    points (at most its budget) and its confirmation batch (the baseline and the winner)."""
    passes = [passes_of(plan)] * len(plan.configs)
    if plan.sweep is not None:
        passes += [passes_of(plan)] * plan.sweep.max_servers
        passes += [passes_of(plan, reps=plan.sweep.confirm_reps)] * 2
    return passes


def estimate(
    plan: BatchPlan,
    history: Sequence[PastRun],
    *,
    ended: int = 0,
    running_s: float = 0.0,
) -> Estimate | None:
    """What is left of a batch that has ended `ended` configurations and has run the current
    one for `running_s` seconds (a queued batch: 0 and 0); None without history."""
    todo = planned(plan)[ended:]
    times = [configuration_s(history, passes=p) for p in todo]
    if any(t is None for t in times):
        return None
    known = [t for t in times if t is not None]
    if not known:
        return Estimate(left_s=0.0, remaining=0)
    current = known[0] - running_s
    rest = sum(known[1:])
    if current < 0:
        return Estimate(left_s=rest, overdue_s=-current, remaining=len(known))
    return Estimate(left_s=current + rest, remaining=len(known))


def to_time(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.replace(tzinfo=dt.UTC) if parsed.tzinfo is None else parsed


def last_end(records: Iterable[RunRecord]) -> dt.datetime | None:
    """When the batch's latest recorded configuration ended (the current one began after)."""
    ends = [t for r in records if (t := to_time(r.finished_at)) is not None]
    return max(ends, default=None)
