"""`watch PRESET ...` and `watch list|show|pause|resume|stop`: the regression watches
(docs/contracts.md "Regression watch"). Data out, never text.

Adding a watch plans its batch as `run` would (everything `run` refuses, `watch` refuses the same
way, when it is added), checks its schedule, and stores it while fewer than
SPECBENCH_MAX_WATCHES watches are active. Running one now, and acknowledging or dismissing a
change, are `jobs.commands.watch_run`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from jobs import settings
from jobs.commands import run
from jobs.commands.context import Context
from jobs.core.plans import BatchPlan
from jobs.core.watch import (
    ACTIVE,
    PAUSED,
    STOPPED,
    Change,
    SeriesPoint,
    WatchRow,
    parse_schedule,
    precision,
)
from jobs.errors import UserError, did_you_mean
from jobs.extras import require

_ID = re.compile(r"^[wc]?(\d{1,9})$")


@dataclass(frozen=True)
class WatchArgs:
    preset: str
    every: str | None = None
    at: str | None = None
    queue: str | None = None
    sets: Sequence[str] = ()


@dataclass(frozen=True)
class Added:
    watch: WatchRow
    plan: BatchPlan
    next_run: dt.datetime


@dataclass(frozen=True)
class WatchShown:
    """A watch, its series (every point, oldest first), its changes and each key's precision;
    the chart's PNG when asked for."""

    watch: WatchRow
    series: list[SeriesPoint]
    changes: list[Change]
    precision: list[dict[str, object]] = field(default_factory=list)
    chart: bytes | None = None


def add(ctx: Context, args: WatchArgs) -> Added:
    schedule = parse_schedule(args.every, args.at)
    planned = run.plan(ctx, run.RunArgs(preset=args.preset, sets=run.parse_sets(args.sets),
                                        queue=args.queue))
    require_detection(ctx)
    now = settings.watch_clock()
    limit = settings.max_watches()
    row = ctx.store.add_watch(preset=planned.preset, schedule=schedule, queue=planned.queue,
                              sets=tuple(args.sets), owner=ctx.caller.user,
                              channel=ctx.caller.channel, created_at=now, max_active=limit)
    if row is None:
        raise UserError(f"{limit} watches are active already, the most SPECBENCH_MAX_WATCHES "
                        "allows; stop one first (watch stop ID)")
    first = schedule.slot_at(now, added=now) or schedule.next_slot(now, added=now)
    return Added(watch=row, plan=planned, next_run=first)


def require_detection(ctx: Context) -> None:
    """A watch's batches judge their series where they run: in embedded mode, here (the `watch`
    extra, or one line naming it); a worker refuses them otherwise."""
    if ctx.dispatcher.mode == "embedded":
        require(("watch", "a regression watch's change detection"))


def watches(ctx: Context) -> list[WatchRow]:
    return ctx.store.list_watches()


def show(ctx: Context, watch: str, *, chart: bool = False) -> WatchShown:
    row = find_watch(ctx, watch)
    series = ctx.store.series(row.id)
    changes = ctx.store.watch_changes(row.id)
    png = None
    if chart:
        require(("charts", "--chart"))
        from jobs.charts.watch import to_watch_png

        png = to_watch_png(series, changes, title=f"watch {row.id}: {row.preset}")
    return WatchShown(watch=row, series=series, changes=changes, precision=precision(changes),
                      chart=png)


def pause(ctx: Context, watch: str) -> WatchRow:
    return _move(ctx, watch, state=PAUSED, allowed=(ACTIVE,))


def resume(ctx: Context, watch: str) -> WatchRow:
    row = find_watch(ctx, watch)
    if row.state == PAUSED and ctx.store.count_active_watches() >= settings.max_watches():
        raise UserError(f"{settings.max_watches()} watches are active already, the most "
                        "SPECBENCH_MAX_WATCHES allows; stop one first (watch stop ID)")
    return _move(ctx, watch, state=ACTIVE, allowed=(PAUSED,))


def stop(ctx: Context, watch: str) -> WatchRow:
    return _move(ctx, watch, state=STOPPED, allowed=(ACTIVE, PAUSED))


def _move(ctx: Context, watch: str, *, state: str, allowed: tuple[str, ...]) -> WatchRow:
    row = find_watch(ctx, watch)
    if row.state == state:
        return row  # asked twice: the answer says where it is
    if row.state not in allowed:
        raise UserError(f"watch {row.id} is {row.state}; a {row.state} watch cannot be "
                        f"{_VERB[state]}")
    ctx.store.set_watch_state(row.id, state)
    return dataclasses.replace(row, state=state)


_VERB = {ACTIVE: "resumed", PAUSED: "paused", STOPPED: "stopped"}


def parse_id(text: str, *, what: str) -> int:
    """A watch's (`3`, `w3`) or a change's (`17`, `c17`) id; UserError for anything else."""
    found = _ID.match(text.strip().lower())
    if found is None:
        raise UserError(f"unknown {what} {text[:40]!r}: {what} ids are numbers (watch list)")
    return int(found[1])


def find_watch(ctx: Context, watch: str) -> WatchRow:
    row = ctx.store.get_watch(parse_id(watch, what="watch"))
    if row is None:
        known = [str(w.id) for w in ctx.store.list_watches()]
        raise UserError(f"unknown watch {watch[:40]!r}{did_you_mean(watch, known)}"
                        + ("" if known else "; no watch is stored yet"))
    return row
