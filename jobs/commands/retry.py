"""`retry BATCH APPROACH[,APPROACH...]`: approaches of a stored batch run again, with its
baseline and the parents they extend (transitively: a sweep's point, the sweep's `extends`),
under the batch's own overrides (plus any new `--set`), so that `vs_parent` is judged again."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from jobs.batches.planning import plan_batch
from jobs.commands.context import Context
from jobs.commands.run import Started, check_flags_if_here, check_reps, submit
from jobs.core.plans import BatchPlan, Overrides, only
from jobs.errors import UserError, did_you_mean


@dataclass(frozen=True)
class RetryArgs:
    batch: str
    approaches: Sequence[str]
    sets: Overrides = field(default_factory=Overrides)  # read where the surface read them
    reps: int | None = None
    rerun_known: bool = False  # a known dead end among them is started anyway


def retry(ctx: Context, args: RetryArgs, *, idempotency_key: str | None = None) -> Started:
    check_reps(args.reps)
    row = ctx.batch(args.batch)
    if row.plan.is_probe:
        raise UserError(f"batch {row.id} is a probe: run `probe` again to measure again")
    old = row.plan
    known = [c.approach for c in (*old.approaches, *old.points)]
    names = rejoin(args.approaches, known)
    for name in names:
        if name not in known:
            raise UserError(f"batch {row.id} has no approach {name!r}{did_you_mean(name, known)}")
    overrides = old.overrides.merged(args.sets)
    planned = plan_batch(row.preset, overrides=overrides, reps=args.reps or old.reps,
                         queue=row.queue)
    chosen = with_parents(planned, names)
    planned = dataclasses.replace(only(planned, chosen), rerun_known=args.rerun_known)
    check_flags_if_here(ctx, planned)
    started = submit(ctx, planned, idempotency_key=idempotency_key)
    return dataclasses.replace(started, added=tuple(n for n in chosen if n not in names))


def with_parents(plan: BatchPlan, names: Sequence[str]) -> list[str]:
    """The named approaches and every approach they extend, parents first, each once."""
    parents = {c.approach: c.parent for c in (*plan.configs, *plan.points)}
    out: list[str] = []
    for name in names:
        chain = [name]
        while (parent := parents.get(chain[-1])) is not None and parent not in chain:
            chain.append(parent)
        out += [n for n in reversed(chain) if n not in out and n != "baseline"]
    return out


def rejoin(names: Sequence[str], known: Sequence[str]) -> list[str]:
    """Names split at every comma, joined again where a sweep's point holds commas of its own
    (`tune@a=1,b=2`): consecutive pieces that make a known name are one name."""
    out: list[str] = []
    pieces = list(names)
    while pieces:
        name = pieces.pop(0)
        joined, rest = name, list(pieces)
        while joined not in known and rest:
            joined += "," + rest.pop(0)
            if joined in known:
                name, pieces = joined, rest
                break
        out.append(name)
    return out
