"""`cancel [BATCH]`: a queued or running batch ended (the caller's latest when none is named).

A cancel always ends the batch (docs/contracts.md "Every batch ends"): a live runner stops it (its
server stopped, the rest skipped); a runner that is gone, or does not stop it within
`runners.CANCEL_WAIT_S`, has it ended here, with the server groups it left on this host killed
(`jobs.batches.runners.finish_cancel`).
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.batches import runners
from jobs.commands.context import Context
from jobs.errors import UserError
from jobs.store import ACTIVE_STATES, TERMINAL_STATES, BatchRow


@dataclass(frozen=True)
class Cancelled:
    """`outcome`: "already-ended", "cancelled" (it never started), "stopped" (its runner
    stopped it) or "ended" (ended here: its runner was gone or did not stop it; the row's
    `error` says why)."""

    row: BatchRow
    outcome: str
    by: str


class Refused(UserError):
    """The caller may not cancel this batch (Slack's rule: its requester or an admin)."""


def cancel(ctx: Context, batch: str | None = None) -> Cancelled:
    if batch:
        row = ctx.batch(batch)
    else:
        mine = [r for r in ctx.store.list_batches(states=ACTIVE_STATES)
                if r.requested_by == ctx.caller.user]
        if not mine:
            raise UserError("you have no queued or running batch; name one: cancel BATCH")
        row = mine[-1]
    if not ctx.access.may_cancel(ctx.caller, row):
        raise Refused(f"refused: only {row.requested_by} or an admin may cancel batch {row.id}")
    if row.state in TERMINAL_STATES:
        return Cancelled(row=row, outcome="already-ended", by=ctx.caller.user)
    row = ctx.dispatcher.cancel(row.id)
    if row.state in TERMINAL_STATES:
        return Cancelled(row=row, outcome="cancelled", by=ctx.caller.user)
    ended, here = runners.finish_cancel(ctx.store, row.id, by=ctx.caller.user)
    return Cancelled(row=ended or row, outcome="ended" if here else "stopped",
                     by=ctx.caller.user)
