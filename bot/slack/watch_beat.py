"""The regression watch in the one scheduler (docs/contracts.md "Regression watch"): the beat's
`watch_tick` task, every SPECBENCH_WATCH_TICK_S, starts each due watch's batch
(`jobs.commands.watch_run.tick`) and tells each watch's thread what happened: a night started or
skipped, a batch ended, a blip, an alert (its owner mentioned, its buttons).

Each message is a part recorded in the store (bot.thread.ledger: scope `watch:<id>` for a night's
lines, `watch-change:<id>` for a change's), so a tick delivered twice, or a beat restarted in the
middle, posts each once. Changes are told once their night's batch has ended, after its end line.
A confirmed change the host has stacks for starts its bisection before its alert, which names it
(bot.slack.watch_bisect: a part too); the bisection's result follows in the thread once it has
ended, and only then is the change marked told. The watches are read from the store at every
tick: changing a watch needs no restart.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from celery import shared_task

from bot import views
from bot.slack import watch_bisect
from bot.slack.client import SlackPoster, make_client
from bot.thread.ledger import Ledger
from bot.thread.messages import Message
from jobs.batches.dispatch import Dispatcher
from jobs.broker.celery_app import WATCH_TICK
from jobs.commands.context import Caller, Context
from jobs.commands.watch_run import TickAction, tick
from jobs.core.watch import BLIP, Change, WatchRow, outcome_text
from jobs.errors import InfraError
from jobs.store import TERMINAL_STATES, Store

log = logging.getLogger(__name__)

SCHEDULER = Caller(user="specbench-beat", surface="beat")
_kept: dict[str, Any] = {}  # this beat's store and dispatcher, made at its first tick


def news(store: Store, actions: list[TickAction], *, poster: SlackPoster | None,
         ctx: Context | None = None) -> None:
    """Tell each watch's thread what this tick did and what ended since; with `ctx` (the
    scheduler's), start the bisection of each confirmed change the host has stacks for."""
    asyncio.run(_news(store, actions, poster=poster, ctx=ctx))


async def _news(store: Store, actions: list[TickAction], *, poster: SlackPoster | None,
                ctx: Context | None) -> None:
    watches = {w.id: w for w in store.list_watches()}  # as now: a thread set since counts
    for action in actions:
        log.info("watch %s, slot %s: %s %s", action.watch.id, action.slot.isoformat(),
                 action.outcome, action.batch or action.why or "")
        watch = watches.get(action.watch.id, action.watch)
        payload = views.watch_night(watch=watch, outcome=action.outcome, slot=action.slot,
                                    batch=action.batch, why=action.why)
        await _post(store, watch, poster=poster, scope=f"watch:{watch.id}",
                    part=f"slot:{action.slot.isoformat()}", payload=payload)
    for watch in watches.values():
        await _ended(store, watch, poster=poster)
    for watch_id, change in store.unposted_changes():
        batch = store.get_batch(change.batch)
        if batch is None or batch.state not in TERMINAL_STATES or watch_id not in watches:
            continue
        if await _told(store, watches[watch_id], change, poster=poster, ctx=ctx):
            assert change.id is not None
            store.mark_change_posted(change.id)


async def _told(store: Store, watch: WatchRow, change: Change, *, poster: SlackPoster | None,
                ctx: Context | None) -> bool:
    """A settled change told in its watch's thread: a blip's line, or the alert (with the
    bisection it starts) and, in a thread, the bisection's result once it has ended. False:
    there is more to tell on a later tick."""
    scope = watch_bisect.scope_of(change)
    if change.state == BLIP:
        payload = views.watch_line(f"Watch {watch.id}: {outcome_text(change)}")
        await _post(store, watch, poster=poster, scope=scope, part="message", payload=payload)
        return True
    try:
        bisecting = await watch_bisect.bisecting(ctx, store, watch, change)
    except InfraError as exc:
        log.warning("watch %s, change %s: its bisection cannot start now (%s); next tick",
                    watch.id, change.id, exc)
        return False
    await _post(store, watch, poster=poster, scope=scope, part="message",
                payload=views.watch_alert(change, watch=watch, bisecting=bisecting))
    batch = (bisecting or {}).get("batch")
    if batch is None or poster is None or watch.channel is None or watch.thread_ts is None:
        return True  # no bisection, or no thread to tell its result in (its report has it)
    row = store.get_batch(str(batch))
    if row is not None and row.state not in TERMINAL_STATES:
        return False
    if row is not None:
        await _post(store, watch, poster=poster, scope=scope, part=watch_bisect.RESULT,
                    payload=views.watch_bisected(change, watch=watch, row=row))
    return True


async def _ended(store: Store, watch: WatchRow, *, poster: SlackPoster | None) -> None:
    """The end line of the watch's last batch, once it has ended."""
    if watch.last_batch is None:
        return
    row = store.get_batch(watch.last_batch)
    if row is None or row.state not in TERMINAL_STATES:
        return
    scope, part = f"watch:{watch.id}", f"end:{row.id}"
    if store.slack_parts(scope).get(part) is not None:
        return
    found = (row.report or {}).get("watch_changes") or []
    payload = views.watch_night(watch=watch, outcome="ended", batch=row.id, state=row.state,
                                error=row.error if row.state != "done" else None, found=found)
    await _post(store, watch, poster=poster, scope=scope, part=part, payload=payload)


async def _post(
    store: Store, watch: WatchRow, *, poster: SlackPoster | None, scope: str, part: str,
    payload: dict[str, Any],
) -> None:
    """One message in the watch's thread, once per (scope, part); logged only where there is no
    thread (a watch added from the CLI) or no Slack token."""
    if poster is None or watch.channel is None or watch.thread_ts is None:
        log.info("watch %s: %s", watch.id, payload["text"])
        return
    ledger = await Ledger.load(store, scope)
    message = Message(text=payload["text"], blocks=payload["blocks"], fallback=payload["text"])
    channel, thread = watch.channel, watch.thread_ts

    async def post() -> str | None:
        return await poster.post(channel=channel, thread_ts=thread, message=message)

    await ledger.once(part, post)


def _store() -> Store:
    if "store" not in _kept:
        _kept["store"] = Store()
    store: Store = _kept["store"]
    return store


def _dispatcher(store: Store) -> Dispatcher:
    if "dispatcher" not in _kept:
        from jobs.dispatchers import get_dispatcher

        _kept["dispatcher"] = get_dispatcher(store)
    dispatcher: Dispatcher = _kept["dispatcher"]
    return dispatcher


def _poster() -> SlackPoster | None:
    token = os.environ.get("SLACK_BOT_TOKEN")
    return None if not token else SlackPoster(make_client(token))


@shared_task(name=WATCH_TICK, ignore_result=True)  # type: ignore[untyped-decorator]
def watch_tick() -> int:
    """Start the watches that are due and tell their threads; the batches it started."""
    store = _store()
    ctx = Context(store=store, caller=SCHEDULER, make_dispatcher=lambda: _dispatcher(store))
    actions = tick(ctx)
    news(store, actions, poster=_poster(), ctx=ctx)
    return sum(1 for a in actions if a.outcome == "started")
