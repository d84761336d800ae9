"""`compare [A] [B]`: two stored batches side by side (`jobs.core.digest` has the rules).

Which two, when not both are named:
- none: the latest batch with a stored report (it ended) and the latest reported one of the
  same preset before it;
- `compare X`: X (the newer side, B) and the latest reported batch of X's preset before it.
- A sweep's confirmation is one experiment with its sweep (docs/contracts.md): never picked by these
  defaults, and `compare CONFIRMATION` pairs it with what came before its sweep.
- `compare A B`: as named (a change is always B against A, whichever is older).
A batch named without a stored report (still running, cut short) gets one built from its
records so far, as `show` does; a probe is never picked, nor compared. Bad input (an unknown
batch, a probe, the same batch twice, no earlier batch to pair with, a different metric) is a
UserError: one line, exit 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobs.commands.context import Context
from jobs.commands.show import report_of
from jobs.core.digest import Side, compare_batches
from jobs.errors import UserError, did_you_mean
from jobs.store import BatchRow
from jobs.store import comparisons as picks


@dataclass(frozen=True)
class CompareArgs:
    a: str | None = None
    b: str | None = None


def compare(ctx: Context, args: CompareArgs | None = None) -> dict[str, Any]:
    """The comparison's data (`jobs.core.digest.compare_batches`)."""
    args = args or CompareArgs()
    if args.a is None and args.b is not None:
        args = CompareArgs(a=args.b)
    if args.a is not None and args.b is not None:
        if args.a == args.b:
            raise UserError(f"compare needs two different batches, got {args.a} twice")
        older, newer = _batch(ctx, args.a), _batch(ctx, args.b)
    else:
        newer = _batch(ctx, args.a) if args.a is not None else _latest(ctx)
        older = _earlier(ctx, newer)
    b = _side(ctx, newer)
    history = {r.approach: ctx.store.history_points(r, row=newer)
               for r in b.records if r.status == "ok"}
    return compare_batches(_side(ctx, older), b, history=history)


def _latest(ctx: Context) -> BatchRow:
    row = picks.latest_reported(ctx.store)
    if row is None:
        raise UserError("no finished batch stored yet: nothing to compare")
    return row


def _earlier(ctx: Context, row: BatchRow) -> BatchRow:
    # a confirmation is one experiment with its sweep: compared with what came before both
    sweep = ctx.store.get_batch(row.plan.confirms) if row.plan.confirms else None
    earlier = picks.latest_reported(ctx.store, preset=row.preset, before=sweep or row)
    if earlier is None:
        raise UserError(
            f"no finished batch of {row.preset} before {row.id}: nothing to compare it with "
            "(compare A B names both)"
        )
    return earlier


def _batch(ctx: Context, batch_id: str) -> BatchRow:
    row = ctx.store.get_batch(batch_id)
    if row is None:
        known = picks.recent_batch_ids(ctx.store)
        raise UserError(f"unknown batch {batch_id!r}{did_you_mean(batch_id, known)}")
    if row.plan.is_probe:
        raise UserError(f"batch {batch_id} is a probe, not an experiment: `show {batch_id}` "
                        "gives its table")
    if row.plan.bisect is not None:
        raise UserError(f"batch {batch_id} is a bisection, not an experiment: `show {batch_id}` "
                        "names its batches, which compare can")
    return row


def _side(ctx: Context, row: BatchRow) -> Side:
    records = ctx.store.records(row.id)
    return Side(
        batch=row.id, preset=row.preset, when=row.created_at.strftime("%Y-%m-%d %H:%M"),
        state=row.state, plan=row.plan, records=tuple(records),
        report=report_of(row, records, store=ctx.store),
    )
