"""The weekly digest in Slack: the beat's `send_digest` task builds the digest (the one digest
path, jobs.commands.digest) and posts it to SPECBENCH_DIGEST_CHANNEL, its trend chart in the
message's thread, through bot.slack.client like every other post.

Only the beat imports this module (`python -m bot.slack.beat` serves the digest queue alone), so
GPU workers need neither a Slack token nor slack_sdk.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
from typing import Any

from celery import shared_task

from bot import views
from bot.slack.client import SlackPoster, make_client
from bot.thread.messages import Message, Upload
from jobs import settings
from jobs.broker.celery_app import SEND_DIGEST
from jobs.broker.streams import connect
from jobs.commands.context import Caller, Context
from jobs.commands.digest import CHART_NAME, CHART_TITLE, digest
from jobs.store import Store

log = logging.getLogger(__name__)

BEAT = Caller(user="specbench-beat", surface="beat")


def publish_digest(store: Store, *, days: float = 7.0) -> bool:
    """Build the digest and its chart from the store and post both."""
    data = digest(Context(store=store, caller=BEAT), days=days)
    return post_digest(views.digest_payload(data), data.chart)


def post_digest(payload: dict[str, Any], chart: bytes | None = None) -> bool:
    """Post a digest payload to SPECBENCH_DIGEST_CHANNEL, the trend chart (PNG) in its thread;
    only logs when SLACK_BOT_TOKEN or the channel is unset."""
    token = os.environ.get("SLACK_BOT_TOKEN")
    channel = os.environ.get("SPECBENCH_DIGEST_CHANNEL")
    if not token or not channel:
        log.info("digest not posted: SLACK_BOT_TOKEN or SPECBENCH_DIGEST_CHANNEL unset")
        return False
    asyncio.run(_post(SlackPoster(make_client(token)), channel=channel, payload=payload,
                      chart=chart))
    return True


async def _post(
    poster: SlackPoster, *, channel: str, payload: dict[str, Any], chart: bytes | None,
) -> None:
    message = Message(text=payload["text"], blocks=payload["blocks"], fallback=payload["text"])
    ts = await poster.post(channel=channel, thread_ts=None, message=message)
    if chart is not None:
        await poster.upload(channel=channel, thread_ts=ts,
                            files=[Upload(CHART_NAME, chart, CHART_TITLE)])


@shared_task(name=SEND_DIGEST, ignore_result=True)  # type: ignore[untyped-decorator]
def send_digest() -> bool:
    """Build and post the digest, once per schedule slot however often beat's message comes."""
    store = Store()
    try:
        client = connect(settings.broker_url() or "")
        slot = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H")
        # One post per schedule slot, even if beat's message were delivered twice.
        if not client.set(f"specbench:digest:{slot}", "sent", nx=True, ex=24 * 3600):
            return False
        return publish_digest(store)
    finally:
        store.close()
