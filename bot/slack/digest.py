"""The weekly digest in Slack: the beat's `send_digest` task builds the digest (the one digest
path, jobs.commands.digest) and posts it to SPECBENCH_DIGEST_CHANNEL, its trend chart in the
message's thread, through bot.slack.client like every other post.

Once per scheduled period: the period is the last time SPECBENCH_DIGEST_SCHEDULE fired
(`schedule_period`), and the message and the chart are parts recorded in the store
(bot.thread.ledger, scope `digest:<period>`), so that beat's message delivered twice, or run
again after a restart, posts nothing twice and finishes what a killed run left (the chart).

Only the beat imports this module (`python -m bot.slack.beat` serves the digest queue alone), so
GPU workers need neither a Slack token nor slack_sdk.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
from typing import Any
from zoneinfo import ZoneInfo

from celery import shared_task

from bot import views
from bot.slack.client import SlackPoster, make_client
from bot.thread.ledger import Ledger
from bot.thread.messages import Message, Upload
from jobs import settings
from jobs.broker.celery_app import DEFAULT_SCHEDULE, SEND_DIGEST, digest_schedule, to_crontab
from jobs.commands.context import Caller, Context
from jobs.commands.digest import CHART_NAME, CHART_TITLE, digest
from jobs.store import Store

log = logging.getLogger(__name__)

BEAT = Caller(user="specbench-beat", surface="beat")
MESSAGE = "message"
CHART = f"upload:{CHART_NAME}"


def publish_digest(store: Store, *, days: float = 7.0, period: str | None = None) -> bool:
    """Build the digest and its chart from the store and post both; with a `period`, once
    (False when that period's digest was posted already)."""
    scope = None if period is None else f"digest:{period}"
    parts = {} if scope is None else store.slack_parts(scope)
    if MESSAGE in parts and all(p.is_done for p in parts.values()):
        log.info("the digest of %s was posted already", period)
        return False
    data = digest(Context(store=store, caller=BEAT), days=days)
    return post_digest(views.digest_payload(data), data.chart,
                       store=None if scope is None else store, scope=scope)


def post_digest(
    payload: dict[str, Any], chart: bytes | None = None, *, store: Store | None = None,
    scope: str | None = None,
) -> bool:
    """Post a digest payload to SPECBENCH_DIGEST_CHANNEL, the trend chart (PNG) in its thread
    (each part once per `scope` when a store is given); only logs when SLACK_BOT_TOKEN or the
    channel is unset."""
    token = os.environ.get("SLACK_BOT_TOKEN")
    channel = os.environ.get("SPECBENCH_DIGEST_CHANNEL")
    if not token or not channel:
        log.info("digest not posted: SLACK_BOT_TOKEN or SPECBENCH_DIGEST_CHANNEL unset")
        return False
    asyncio.run(_post(SlackPoster(make_client(token)), channel=channel, payload=payload,
                      chart=chart, store=store, scope=scope or "digest"))
    return True


async def _post(
    poster: SlackPoster, *, channel: str, payload: dict[str, Any], chart: bytes | None,
    store: Store | None, scope: str,
) -> None:
    ledger = await Ledger.load(store, scope)
    message = Message(text=payload["text"], blocks=payload["blocks"], fallback=payload["text"])

    async def post() -> str | None:
        return await poster.post(channel=channel, thread_ts=None, message=message)

    ts = await ledger.once(MESSAGE, post)  # top level: no thread to look in, so posted again
    if chart is None or ts is None:
        return

    async def upload() -> str | None:
        await poster.upload(channel=channel, thread_ts=ts,
                            files=[Upload(CHART_NAME, chart, CHART_TITLE)])
        return CHART_NAME

    async def find() -> str | None:
        return await poster.find_reply(channel=channel, thread_ts=ts, filename=CHART_NAME)

    await ledger.once(CHART, upload, find=find)


def schedule_period(now: dt.datetime | None = None) -> str:
    """The last time the digest's schedule fired at or before `now`, in SPECBENCH_TIMEZONE, as
    `YYYY-MM-DDTHH:MM`: every delivery of one slot's message names the same period."""
    cron = to_crontab(digest_schedule() or DEFAULT_SCHEDULE)
    local = (now or dt.datetime.now(dt.UTC)).astimezone(ZoneInfo(settings.timezone()))
    for back in range(367):
        day = local.date() - dt.timedelta(days=back)
        if (day.month not in cron.month_of_year or day.day not in cron.day_of_month
                or day.isoweekday() % 7 not in cron.day_of_week):  # celery: 0 is Sunday
            continue
        times = [(h, m) for h in cron.hour for m in cron.minute
                 if back or (h, m) <= (local.hour, local.minute)]
        if times:
            hour, minute = max(times)
            return f"{day.isoformat()}T{hour:02d}:{minute:02d}"
    return local.strftime("%Y-%m-%dT%H:%M")  # a schedule that has not fired for a year


@shared_task(name=SEND_DIGEST, ignore_result=True)  # type: ignore[untyped-decorator]
def send_digest() -> bool:
    """Build and post the digest, once per scheduled period however often beat's message
    comes."""
    store = Store()
    try:
        period = schedule_period()
        return publish_digest(store, period=period)
    finally:
        store.close()


