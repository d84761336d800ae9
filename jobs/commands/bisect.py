"""`bisect PRESET APPROACH --from GOOD --to BAD [--before V --after V]`: the first of the host's
stacks, between GOOD (without the change) and BAD (with it), where the configuration's change
appears (docs/contracts.md "Stacks", bisect). A bisect batch is submitted; the worker that takes
it runs its parts, one batch per stack measured (jobs.batches.bisecting).

The input is plain data: the configuration (a preset's approach, or its baseline), the metric
(the preset's), the two stacks and, when known (as the regression watch knows them), the values
before and after the change. SPEC's `bisect WATCH` form wraps this command with a watch's
change.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from jobs.batches.bisecting import candidates
from jobs.batches.planning import plan_batch
from jobs.batches.values import check_values
from jobs.commands.context import Context
from jobs.commands.run import PATH_SURFACES, Started, check_reps, submit
from jobs.core.plans import BatchPlan, find_named_preset, only, parse_sets
from jobs.core.stacks import load_stacks, need_stacks
from jobs.errors import UserError, did_you_mean


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


def _check_values(before: float | None, after: float | None) -> None:
    if (before is None) != (after is None):
        raise UserError("--before and --after go together: the values without and with the "
                        "change (or neither: the two stacks are measured first)")
    for name, value in (("--before", before), ("--after", after)):
        if value is not None and (not math.isfinite(value) or value < 0):
            raise UserError(f"{name} must be a number of 0 or more, got {value}")
    if before is not None and before == after:
        raise UserError(f"--before and --after are the same ({before:g}): no change to bisect")

