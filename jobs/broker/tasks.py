"""The Celery tasks: `run_batch(batch_id)` and the beat's `send_digest()`.

A task takes an ID, loads the rest from the store and calls one core function. `run_batch` runs
a batch only while it holds the batch's store lease (renewed by a heartbeat thread), so that a
duplicate or re-sent message, however late, never runs a batch twice at once.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Callable
from typing import Any

from celery import shared_task

from jobs import settings
from jobs.batches.execution import execute_batch
from jobs.broker.celery_app import RUN_BATCH, SEND_DIGEST
from jobs.broker.streams import connect
from jobs.broker.worker import Runtime, registry_dir, runtime
from jobs.core.events import make_event
from jobs.engines import procs
from jobs.store import TERMINAL_STATES, Store

log = logging.getLogger(__name__)


class LeaseLost(Exception):
    """Another worker took the batch's lease: this one must let go at once."""


class LeaseKeeper:
    """Renews a held lease every TTL/3; `check` (the batch's stop callback) raises once lost."""

    def __init__(self, store: Store, *, batch_id: str, owner: str, ttl: float) -> None:
        self._store, self._batch_id, self._owner, self._ttl = store, batch_id, owner, ttl
        self._stop = threading.Event()
        self.lost = False
        self._thread = threading.Thread(target=self._renew, name=f"lease-{batch_id}",
                                        daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            self._store.release_lease(self._batch_id, self._owner)
        except Exception:  # noqa: BLE001 - it expires by itself
            log.warning("could not release the lease of %s", self._batch_id, exc_info=True)

    def check(self) -> bool:
        if self.lost:
            raise LeaseLost(self._batch_id)
        return False

    def _renew(self) -> None:
        while not self._stop.wait(self._ttl / 3):
            try:
                if not self._store.renew_lease(self._batch_id, self._owner, self._ttl):
                    log.error("lease of %s taken by another worker; stopping", self._batch_id)
                    self.lost = True
                    return
            except Exception:  # noqa: BLE001 - a store hiccup: the next renewal may succeed
                log.warning("lease renewal of %s failed", self._batch_id, exc_info=True)


def run_leased(rt: Runtime, batch_id: str) -> str:
    """Run (or resume) a batch if no live worker holds it; what happened, in a word."""
    row = rt.store.get_batch(batch_id)
    if row is None:
        return "unknown"
    if row.state in TERMINAL_STATES:
        return "ended"
    owner = f"{rt.worker_id}:{uuid.uuid4().hex[:8]}"
    if not rt.store.try_acquire_lease(batch_id, owner, rt.ttl):
        return "leased"
    rt.set_busy(True)
    try:
        with LeaseKeeper(rt.store, batch_id=batch_id, owner=owner, ttl=rt.ttl) as keeper:
            row = rt.store.get_batch(batch_id)  # it may have ended before we took the lease
            if row is None or row.state in TERMINAL_STATES:
                return "ended"
            procs.kill_orphans(registry_dir(rt.queue))
            try:
                execute_batch(batch_id, store=rt.store, sink=rt.sink, should_stop=keeper.check)
            except LeaseLost:
                return "lost"
            except Exception as exc:  # noqa: BLE001 - a batch's bug must not kill the worker
                log.exception("batch %s failed", batch_id)
                rt.store.set_state(batch_id, "failed", error=str(exc)[:500])
                rt.sink.emit(make_event("batch.finished", batch_id, state="failed", report=None,
                                        error=str(exc)[:500]))
                return "failed"
            return "ran"
    finally:
        rt.set_busy(False)


@shared_task(name=RUN_BATCH, ignore_result=True)  # type: ignore[untyped-decorator]
def run_batch(batch_id: str) -> str:
    result = run_leased(runtime(), batch_id)
    log.info("run_batch %s: %s", batch_id, result)
    return result


# -- the digest -------------------------------------------------------------------------------

CHART_NAME = "specbench-digest-trend.png"
CHART_TITLE = "Best value per preset and hardware, day by day"
Poster = Callable[[dict[str, Any], bytes | None], None]
_poster: Poster | None = None


def set_poster(poster: Poster | None) -> None:
    """Where `post_digest` sends the payload and chart (instead of Slack's Web API)."""
    global _poster
    _poster = poster


def post_digest(payload: dict[str, Any], chart: bytes | None = None) -> bool:
    """Post the digest to SPECBENCH_DIGEST_CHANNEL, the trend chart (PNG) in its thread;
    only logs without SLACK_BOT_TOKEN. Every client honours SLACK_API_URL."""
    channel = os.environ.get("SPECBENCH_DIGEST_CHANNEL")
    if not os.environ.get("SLACK_BOT_TOKEN") or not channel:
        log.info("digest not posted: SLACK_BOT_TOKEN or SPECBENCH_DIGEST_CHANNEL unset")
        return False
    if _poster is not None:
        _poster(payload, chart)
        return True
    from slack_sdk import WebClient
    from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

    base = os.environ.get("SLACK_API_URL") or "https://slack.com/api/"
    client = WebClient(token=os.environ["SLACK_BOT_TOKEN"], base_url=base.rstrip("/") + "/",
                       retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=5)])
    posted = client.chat_postMessage(channel=channel, text=payload["text"],
                                     blocks=payload["blocks"], unfurl_links=False)
    if chart is not None:
        client.files_upload_v2(channel=channel, thread_ts=str(posted["ts"]), content=chart,
                               filename=CHART_NAME, title=CHART_TITLE, request_file_info=False)
    return True


def digest_message(store: Store, *, days: float = 7.0) -> tuple[dict[str, Any], bytes | None]:
    """The digest's chat.postMessage payload and its trend chart (None without data)."""
    from jobs.core.messages import render_blocks, render_text
    from jobs.core.trends import digest_with_trend

    digest, chart = digest_with_trend(store, days=days, tz=settings.timezone())
    payload = render_blocks("digest", fallback=render_text("digest", digest=digest),
                            digest=digest, chart=chart is not None)
    return payload, chart


def digest_payload(store: Store, *, days: float = 7.0) -> dict[str, Any]:
    return digest_message(store, days=days)[0]


def publish_digest(store: Store, *, days: float = 7.0) -> bool:
    """Build the digest and its chart from the store and post both."""
    payload, chart = digest_message(store, days=days)
    return post_digest(payload, chart)


@shared_task(name=SEND_DIGEST, ignore_result=True)  # type: ignore[untyped-decorator]
def send_digest() -> bool:
    """Build and post the digest, once per schedule slot however many workers' beats fire."""
    import datetime as dt

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
