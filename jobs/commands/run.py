"""`run PRESET`: a preset planned, its flags checked, and submitted to the dispatcher.

From chat (every surface but the CLI) PRESET is a name from the config dir's presets folder;
a path to a YAML file is the operator's, on the command line (`jobs.core.plans`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from jobs.batches import runners, stacks
from jobs.batches.dispatch import Submitted
from jobs.batches.planning import check_flags, plan_batch
from jobs.batches.values import check_values
from jobs.commands.context import Context
from jobs.core.plans import BatchPlan, Preset, find_named_preset
from jobs.core.plans import Overrides as Overrides  # a surface reads `--set` words into these:
from jobs.core.plans import parse_sets as parse_sets  # with this
from jobs.errors import UserError

MAX_REPS = 20
"""The most repetitions a batch may ask for with `--reps`, on every surface: each one is a full
benchmark pass of every configuration, so a typo (`--reps 300`) would hold a GPU host for days.
A preset may set more in its own `reps`."""

PATH_SURFACES = ("cli",)
"""The surfaces where PRESET may be a path to a YAML file: the operator's own command line."""


@dataclass(frozen=True)
class RunArgs:
    preset: str  # a name, or (the CLI's) a path
    sets: Overrides = field(default_factory=Overrides)  # read where the surface read them
    reps: int | None = None
    engine: str | None = None
    queue: str | None = None
    rerun_known: bool = False  # start known dead ends too
    stack: str | None = None  # docs/contracts.md "Stacks": the host's stack to run on
    against: str | None = None  # an upgrade check: every configuration again on this stack
    read: Preset | None = None  # the preset as the CLI read it first: not read again


@dataclass(frozen=True)
class Started:
    """A submitted batch and the warnings its plan raised before it started."""

    submitted: Submitted
    plan: BatchPlan
    warnings: tuple[str, ...] = field(default=())
    added: tuple[str, ...] = field(default=())  # retry: parents run with the named approaches


def plan(ctx: Context, args: RunArgs) -> BatchPlan:
    """The checked plan of `run` (bad input raises UserError: exit 2, nothing stored).

    The preset and its knobs are checked here, wherever the command runs, and so is every value
    against the engine's flag types (`jobs.batches.values`). The engine's flags
    are checked where the engine is: here in embedded mode, where this process is the worker;
    in distributed mode by the worker that takes the batch (`execute_batch`), since this host
    may have no engine at all (docs/contracts.md's engine contracts)."""
    check_reps(args.reps)
    if ctx.caller.surface not in PATH_SURFACES:
        find_named_preset(args.preset)  # a path from chat is refused before anything is read
    planned = plan_batch(
        args.preset if args.read is None else args.read,
        engine=args.engine, overrides=args.sets, reps=args.reps, queue=args.queue,
    )
    if args.rerun_known:
        planned = dataclasses.replace(planned, rerun_known=True)
    if args.stack is not None or args.against is not None:
        planned = dataclasses.replace(planned, stack=args.stack, against=args.against)
    check_flags_if_here(ctx, planned)
    return planned


def run(ctx: Context, args: RunArgs, *, idempotency_key: str | None = None) -> Started:
    return submit(ctx, plan(ctx, args), idempotency_key=idempotency_key)


def submit(ctx: Context, planned: BatchPlan, *, idempotency_key: str | None = None) -> Started:
    runners.settle(ctx.store)  # no new batch queues behind one whose runner died
    submitted = ctx.dispatcher.submit(
        planned, requested_by=ctx.caller.user, channel=ctx.caller.channel,
        idempotency_key=idempotency_key,
    )
    return Started(submitted=submitted, plan=planned, warnings=planned.warnings)


def check_flags_if_here(ctx: Context, planned: BatchPlan) -> None:
    """Every value against the engine's flag types, wherever this runs (the types ship with
    specbench: a bot's host without the engine checks them too); then preflight now when this
    process runs the batch (embedded), a worker does it otherwise."""
    check_values(planned)
    embedded = ctx.dispatcher.mode == "embedded"
    stacks.check_names(planned, embedded=embedded)  # docs/contracts.md "Stacks"
    if embedded:
        found = stacks.resolve(planned, here=False)  # checked just above
        check_flags(planned, ctx.engine(planned.engine) if found.current is None
                    else stacks.engine_on(planned.engine, found.current))


def check_reps(reps: int | None) -> None:
    if reps is not None and reps < 1:
        raise UserError(f"--reps must be at least 1, got {reps}")
    if reps is not None and reps > MAX_REPS:
        raise UserError(f"--reps must be at most {MAX_REPS}, got {reps}")
