"""The Celery app: broker and result backend from SPECBENCH_BROKER_URL, JSON only.

Messages are wake-ups carrying a batch ID; the batch's state lives in the store. So a message is
acknowledged as soon as a worker takes it (`task_acks_late=False`): Redis's visibility timeout
can never deliver a long batch a second time, and a message lost with a dead worker is no loss,
because a starting or idle worker re-sends `run_batch` for every unfinished batch of its queue
whose lease has lapsed (`jobs.broker.worker`). The store's lease is what keeps a batch from ever
running twice at once.

The digest task lives with the Slack code (bot.slack.digest), and so does the regression watch's
tick (bot.slack.watch_beat, every SPECBENCH_WATCH_TICK_S): only the beat process registers them
(`include`), so a GPU worker never imports slack_sdk.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from celery import Celery
from celery.schedules import crontab

from jobs import settings

RUN_BATCH = "specbench.run_batch"
SEND_DIGEST = "specbench.send_digest"
WATCH_TICK = "specbench.watch_tick"
DIGEST_QUEUE = "specbench.digest"  # served by `python -m bot.slack.beat` alone, never a GPU worker
DEFAULT_SCHEDULE = "0 9 * * 1"  # Monday 09:00


def digest_schedule() -> str | None:
    """The digest's cron expression; None when SPECBENCH_DIGEST_SCHEDULE is `off`."""
    value = os.environ.get("SPECBENCH_DIGEST_SCHEDULE", "").strip() or DEFAULT_SCHEDULE
    return None if value.lower() in ("off", "none", "never") else value


def to_crontab(expression: str) -> crontab:
    """A five-field cron expression (minute hour day-of-month month day-of-week)."""
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(f"SPECBENCH_DIGEST_SCHEDULE needs 5 cron fields, got {expression!r}")
    minute, hour, day_of_month, month, day_of_week = fields
    return crontab(minute=minute, hour=hour, day_of_month=day_of_month,
                   month_of_year=month, day_of_week=day_of_week)


def make_app(
    broker_url: str | None = None, *, include: Sequence[str] = ("jobs.broker.tasks",)
) -> Celery:
    """The app on `broker_url`; a worker imports the task modules in `include` (by default the
    GPU worker's `run_batch`)."""
    url = broker_url or settings.broker_url() or "redis://127.0.0.1:6379/0"
    app = Celery("specbench", broker=url, backend=url, include=list(include))
    schedule = digest_schedule()
    tick = settings.watch_tick_s()
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,  # results live in the store
        task_acks_late=False,  # see the module's docstring
        worker_prefetch_multiplier=1,
        worker_concurrency=1,  # one server at a time per GPU host
        broker_connection_retry_on_startup=True,
        broker_connection_timeout=2.0,
        broker_transport_options={"socket_timeout": 5, "socket_connect_timeout": 2},
        task_publish_retry_policy={"max_retries": 2, "interval_start": 0,
                                   "interval_step": 0.2, "interval_max": 0.5},
        task_default_queue=settings.default_queue(),
        task_routes={SEND_DIGEST: {"queue": DIGEST_QUEUE}, WATCH_TICK: {"queue": DIGEST_QUEUE}},
        worker_hijack_root_logger=False,
        timezone=settings.timezone(),
        enable_utc=True,
        beat_schedule={
            **({"weekly-digest": {"task": SEND_DIGEST, "schedule": to_crontab(schedule)}}
               if schedule else {}),
            # a tick left unread by then is dropped: the next one does its work
            "watch-tick": {"task": WATCH_TICK, "schedule": tick,
                           "options": {"expires": max(tick, 1.0)}},
        },
    )
    return app
