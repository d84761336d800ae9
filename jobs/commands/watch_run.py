"""A watch's batches and its changes' acknowledgements (docs/contracts.md "Regression watch"):
`watch run ID` (one run now), `watch ack|dismiss CHANGE`, and `tick`, what the one scheduler
starts each time it looks. Data out, never text.

A watch's batch is an ordinary batch of its preset with `"watch": ID`: planned as `run` plans it,
submitted to the watch's queue. A watch never overlaps itself: while its last batch is queued or
running, a due slot is skipped (and the tick says so) and `watch run` is refused. A tick starts
only the latest due slot of each watch, so nights missed while the scheduler was down are caught
up once; each slot's batch is keyed by the watch and the slot, so two ticks start it once.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass

from jobs import settings
from jobs.commands import run
from jobs.commands.context import Context
from jobs.commands.watch import find_watch, parse_id, require_detection
from jobs.core.plans import BatchPlan
from jobs.core.watch import ACTIONS, ACTIVE, ALERTED, STOPPED, Change, WatchRow
from jobs.errors import UserError
from jobs.store import TERMINAL_STATES


@dataclass(frozen=True)
class Acked:
    """An acknowledgement or a dismissal: the change as it is now, and whether this one was
    recorded (False: the change had one already, whose user and time it names)."""

    watch: int
    change: Change
    applied: bool


@dataclass(frozen=True)
class TickAction:
    """What a tick did for one watch at one slot: `started` a batch, `skipped` it (the last
    batch still runs), or `failed` to plan it (the preset changed under the watch)."""

    watch: WatchRow
    slot: dt.datetime
    outcome: str
    batch: str | None = None
    why: str | None = None


def watch_plan(ctx: Context, row: WatchRow, *, at: dt.datetime) -> BatchPlan:
    """The watch's batch: its preset planned as `run` would, marked with the watch and dated by
    `at`."""
    # the watch keeps its --set words as given; read here, where they come back from the store
    planned = run.plan(ctx, run.RunArgs(preset=row.preset, sets=run.parse_sets(row.sets),
                                        queue=row.queue))
    require_detection(ctx)
    return dataclasses.replace(planned, watch=row.id, watch_at=at.isoformat())


def run_plan(ctx: Context, watch: str) -> tuple[WatchRow, BatchPlan]:
    """The watch and the batch `watch run` starts now; refused for a stopped watch and while
    its last batch still runs."""
    row = find_watch(ctx, watch)
    if row.state == STOPPED:
        raise UserError(f"watch {row.id} is stopped; add it again to run it")
    if (busy := _running(ctx, row)) is not None:
        raise UserError(f"watch {row.id}'s batch {busy} is still {_state(ctx, busy)}; a watch "
                        "never overlaps itself")
    return row, watch_plan(ctx, row, at=settings.watch_clock())


def run_now(ctx: Context, watch: str, *, idempotency_key: str | None = None) -> run.Started:
    row, planned = run_plan(ctx, watch)
    started = run.submit(ctx, planned, idempotency_key=idempotency_key)
    ctx.store.set_watch_batch(row.id, started.submitted.batch.id)
    return started


def acknowledge(ctx: Context, change: str, *, action: str) -> Acked:
    """`watch ack CHANGE` ("ack") or `watch dismiss CHANGE` ("dismiss"): recorded with the user
    and the time, once; a dismissed change is never alerted again (its segment stays cut)."""
    change_id = parse_id(change, what="change")
    found = ctx.store.get_change(change_id)
    if found is None:
        raise UserError(f"unknown change {change[:40]!r}; `watch show ID` lists a watch's "
                        "changes")
    watch_id, current = found
    if current.state not in ALERTED:
        raise UserError(f"change {change_id} is a {current.state}, not an alert: only a "
                        "confirmed change is acknowledged or dismissed")
    applied = ctx.store.ack_change(change_id, action=action, user=ctx.caller.user,
                                   at=settings.watch_clock())
    now = ctx.store.get_change(change_id)
    assert now is not None and action in ACTIONS
    return Acked(watch=watch_id, change=now[1], applied=applied)


def tick(ctx: Context, *, now: dt.datetime | None = None) -> list[TickAction]:
    """Start (or skip) the due slot of every active watch."""
    now = now or settings.watch_clock()
    actions: list[TickAction] = []
    for row in ctx.store.list_watches(states=(ACTIVE,)):
        slot = row.due_slot(now)
        if slot is None:
            continue
        if (busy := _running(ctx, row)) is not None:
            if ctx.store.claim_slot(row.id, slot):
                actions.append(TickAction(row, slot, "skipped", batch=busy))
            continue
        try:
            planned = watch_plan(ctx, row, at=slot)
        except UserError as exc:
            if ctx.store.claim_slot(row.id, slot):
                actions.append(TickAction(row, slot, "failed", why=str(exc)))
            continue
        started = run.submit(ctx, planned, idempotency_key=f"watch:{row.id}:{slot.isoformat()}")
        batch = started.submitted.batch.id
        ctx.store.set_watch_batch(row.id, batch)
        if ctx.store.claim_slot(row.id, slot):
            actions.append(TickAction(row, slot, "started", batch=batch))
    return actions


def _running(ctx: Context, row: WatchRow) -> str | None:
    """The watch's last batch while it is queued or running, else None."""
    if row.last_batch is None:
        return None
    last = ctx.store.get_batch(row.last_batch)
    return None if last is None or last.state in TERMINAL_STATES else last.id


def _state(ctx: Context, batch: str) -> str:
    row = ctx.store.get_batch(batch)
    return "queued" if row is None else row.state
