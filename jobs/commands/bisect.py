"""`bisect PRESET APPROACH --from GOOD --to BAD [--before V --after V]`: the first of the host's
stacks, between GOOD (without the change) and BAD (with it), where the configuration's change
appears (docs/contracts.md "Stacks", bisect). A bisect batch is submitted; the worker that takes
it runs its parts, one batch per stack measured (jobs.batches.bisecting).

The input is plain data: the configuration (a preset's approach, or its baseline), the metric
(the preset's), the two stacks and, when known (as the regression watch knows them), the values
before and after the change.

`bisect WATCH [--change CHANGE]` bisects a watch's confirmed change (its newest confirmed one
unless `--change` names another): the watch's preset with its `--set` words, on its queue, the
change's configuration, key and load level, its values before and after, and its last good and
first bad point's stacks, among which the worker finds the host's stacks between
(jobs.batches.bisecting). The beat starts the same for each confirmed change with a stack diff
(`start_for_change`, once per change: its idempotency key).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from jobs.batches.bisecting import candidates, host_span
from jobs.batches.planning import plan_batch
from jobs.batches.values import check_values
from jobs.commands.context import Context
from jobs.commands.run import PATH_SURFACES, Started, check_reps, submit
from jobs.commands.watch import find_watch, parse_id
from jobs.core.plans import BatchPlan, find_named_preset, only, parse_sets
from jobs.core.stacks import load_stacks, need_stacks, point_label, why_not_bisected
from jobs.core.watch import ACKNOWLEDGED, ALERTED, CONFIRMED, Change, WatchRow
from jobs.errors import UserError, did_you_mean

BISECTABLE = (CONFIRMED, ACKNOWLEDGED)  # what `bisect WATCH` takes by default (not dismissed)


@dataclass(frozen=True)
class BisectArgs:
    preset: str
    approach: str
    good: str  # --from: the stack without the change
    bad: str  # --to: the stack with it
    before: float | None = None  # the configuration's value without the change
    after: float | None = None  # and with it
    sets: Sequence[str] = ()
    reps: int | None = None


def plan(ctx: Context, args: BisectArgs) -> BatchPlan:
    """The checked bisect batch (bad input: UserError, exit 2, nothing stored)."""
    check_reps(args.reps)
    _check_values(args.before, args.after)
    if ctx.caller.surface not in PATH_SURFACES:
        find_named_preset(args.preset)
    planned = plan_batch(args.preset, overrides=parse_sets(list(args.sets)), reps=args.reps)
    known = [c.approach for c in planned.configs]
    if args.approach not in known:
        raise UserError(f"preset {planned.preset!r} has no approach {args.approach!r}"
                        f"{did_you_mean(args.approach, known)}; its configurations: "
                        f"{', '.join(known)}")
    planned = only(planned, [args.approach])
    planned = dataclasses.replace(planned, bisect={
        "approach": args.approach, "from": args.good, "to": args.bad, "before": args.before,
        "after": args.after})
    check_values(planned)
    embedded = ctx.dispatcher.mode == "embedded"
    if embedded or load_stacks() is not None:  # the names, where the host's file is
        found = need_stacks(f"bisect --from {args.good} --to {args.bad}")
        for name in (args.good, args.bad):
            found.get(name, engine=planned.engine)
        if args.good == args.bad:
            raise UserError(f"--from and --to are the same stack ({args.good}): nothing to "
                            "bisect")
    if embedded:  # this process is the worker: its stacks in order, --from before --to
        candidates(planned, good=args.good, bad=args.bad)
    return planned


def bisect(ctx: Context, args: BisectArgs, *, idempotency_key: str | None = None) -> Started:
    return submit(ctx, plan(ctx, args), idempotency_key=idempotency_key)


def check_form(*, approach: str | None, change: str | None, good: str | None, bad: str | None,
               preset_options: Sequence[str]) -> None:
    """Which form a command line is: `bisect WATCH [--change CHANGE]` (no APPROACH) takes
    nothing `bisect PRESET APPROACH --from --to` names (`preset_options`: those given)."""
    if approach is None:
        if preset_options:
            verb = "goes" if len(preset_options) == 1 else "go"
            raise UserError(f"bisect WATCH takes the configuration, stacks and values from the "
                            f"watch's change: {', '.join(preset_options)} {verb} with bisect "
                            "PRESET APPROACH")
        return
    if change is not None:
        raise UserError("--change goes with bisect WATCH, not with bisect PRESET APPROACH")
    if good is None or bad is None:
        raise UserError("bisect PRESET APPROACH needs --from STACK and --to STACK")


@dataclass(frozen=True)
class WatchBisectArgs:
    watch: str  # a watch's id (`3`, `w3`)
    change: str | None = None  # one of its changes (`17`, `c17`); default: its newest confirmed
    reps: int | None = None


def watch_change(ctx: Context, args: WatchBisectArgs) -> tuple[WatchRow, Change]:
    """The watch and the confirmed change to bisect (bad input: UserError)."""
    row = find_watch(ctx, args.watch)
    if args.change is None:
        confirmed = [c for c in ctx.store.watch_changes(row.id) if c.state in BISECTABLE]
        if not confirmed:
            raise UserError(f"watch {row.id} has no confirmed change to bisect (`watch show "
                            f"{row.id}` lists its changes)")
        return row, confirmed[-1]
    change_id = parse_id(args.change, what="change")
    found = ctx.store.get_change(change_id)
    if found is None:
        raise UserError(f"unknown change {args.change[:40]!r}; `watch show {row.id}` lists "
                        "its changes")
    watch_id, change = found
    if watch_id != row.id:
        raise UserError(f"change {change_id} is of watch {watch_id}, not of watch {row.id}")
    if change.state not in ALERTED:
        raise UserError(f"change {change_id} is a {change.state}, not a confirmed change: "
                        "nothing to bisect")
    return row, change


def change_plan(ctx: Context, row: WatchRow, change: Change, *,
                reps: int | None = None) -> BatchPlan:
    """The bisect batch of a watch's confirmed change (UserError where no stack can explain
    it: no stack diff, an environment change, a diff of nothing a stack holds)."""
    check_reps(reps)
    planned = plan_batch(row.preset, overrides=parse_sets(list(row.sets)), reps=reps)
    asked = change.bisect()
    why = why_not_bisected(asked, engine=planned.engine)
    if why is not None:
        raise UserError(f"change {change.id} of watch {row.id} cannot be bisected over "
                        f"stacks: {why}")
    approach = str(asked["approach"])
    if approach not in [c.approach for c in planned.configs]:
        raise UserError(f"change {change.id} is of {approach!r}, which preset "
                        f"{planned.preset!r} no longer has")
    span = change.data.get("span") or {}
    planned = dataclasses.replace(only(planned, [approach]), queue=row.queue, bisect={
        **asked, "watch": row.id, "change": change.id,
        "from": span.get("from") or point_label(asked["last_good"], engine=planned.engine),
        "to": span.get("to") or point_label(asked["first_bad"], engine=planned.engine)})
    check_values(planned)
    if ctx.dispatcher.mode == "embedded":  # this process is the worker: its stacks file read
        host_span(planned, dict(planned.bisect or {}))
    return planned


def plan_watch(ctx: Context, args: WatchBisectArgs) -> BatchPlan:
    """`bisect WATCH [--change CHANGE]`, checked (bad input: UserError, nothing stored)."""
    row, change = watch_change(ctx, args)
    return change_plan(ctx, row, change, reps=args.reps)


def bisect_watch(ctx: Context, args: WatchBisectArgs, *,
                 idempotency_key: str | None = None) -> Started:
    return submit(ctx, plan_watch(ctx, args), idempotency_key=idempotency_key)


def change_key(change_id: int) -> str:
    """The idempotency key of the bisection the beat starts for a change."""
    return f"watch-bisect:{change_id}"


def start_for_change(ctx: Context, row: WatchRow, change: Change) -> Started:
    """The beat's bisection of a confirmed change: started once, however often it is asked."""
    assert change.id is not None
    return submit(ctx, change_plan(ctx, row, change), idempotency_key=change_key(change.id))


def _check_values(before: float | None, after: float | None) -> None:
    if (before is None) != (after is None):
        raise UserError("--before and --after go together: the values without and with the "
                        "change (or neither: the two stacks are measured first)")
    for name, value in (("--before", before), ("--after", after)):
        if value is not None and (not math.isfinite(value) or value < 0):
            raise UserError(f"{name} must be a number of 0 or more, got {value}")
    if before is not None and before == after:
        raise UserError(f"--before and --after are the same ({before:g}): no change to bisect")

