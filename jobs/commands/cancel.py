"""`cancel [BATCH]`: a queued or running batch stopped (the caller's latest when none is named)."""

from __future__ import annotations

from dataclasses import dataclass

from jobs.commands.context import Context
from jobs.core.errors import UserError
from jobs.store import TERMINAL_STATES, BatchRow


@dataclass(frozen=True)
class Cancelled:
    """`outcome`: "already-ended", "cancelled" (it never started) or "requested" (it stops)."""

    row: BatchRow
    outcome: str
    by: str


class Refused(UserError):
    """The caller may not cancel this batch (Slack's rule: its requester or an admin)."""


def cancel(ctx: Context, batch: str | None = None) -> Cancelled:
    if batch:
        row = ctx.batch(batch)
    else:
        mine = [r for r in ctx.store.list_batches(states=("queued", "running"))
                if r.requested_by == ctx.caller.user]
        if not mine:
            raise UserError("you have no queued or running batch; name one: cancel BATCH")
        row = mine[-1]
    if not ctx.access.may_cancel(ctx.caller, row):
        raise Refused(f"refused: only {row.requested_by} or an admin may cancel batch {row.id}")
    if row.state in TERMINAL_STATES:
        return Cancelled(row=row, outcome="already-ended", by=ctx.caller.user)
    row = ctx.dispatcher.cancel(row.id)
    outcome = "cancelled" if row.state == "cancelled" else "requested"
    return Cancelled(row=row, outcome=outcome, by=ctx.caller.user)
