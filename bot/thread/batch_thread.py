"""A batch's chat thread: follows its events and drives a `Poster` (Slack or the console).

The thread is: a parent message (preset, who, host, queue position); in the thread one progress
message edited in place (bot.thread.progress_message), at most once per batch every `interval`
seconds; at the end the summary as a reply with its buttons, the chart and the run records as
uploads (bot.thread.summary_message), and the parent edited to the headline. Posting state lives
in the store, so a restarted bot resumes a thread and does each part of its end once, retried
until done (`ThreadHub.catch_up`, bot.thread.thread_end). With a durable `Feed` (distributed
mode: a Redis consumer group) each event is acknowledged only once its thread has handled it
(an end event: once the summary is posted), so a bot that dies mid-batch leaves the rest of its
events to its successor. A database blip stops nothing: every store call of the thread is
retried with backoff (bot.thread.store_retry) and the thread carries on, its summary posted once
the store is back.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from bot.thread.end_watch import EndWatch, is_end
from bot.thread.messages import Ack, Message, redacted, render_message
from bot.thread.ports import Hub
from bot.thread.progress_message import Coalescer, ProgressMessage
from bot.thread.store_retry import Outage, describe, is_blip, off_loop, patiently
from bot.thread.thread_end import finish_thread
from jobs import redaction
from jobs.batches.dispatch import Submitted
from jobs.core.events import Event
from jobs.core.plans import PROBE
from jobs.core.probe_text import asked_text as probe_asked
from jobs.store import BatchRow

log = logging.getLogger(__name__)

STORE_POLL_S = 5.0  # how often an idle thread checks the store for an end it missed


@dataclass
class BatchThread:
    """One batch's thread; `events` is fed by the hub, in order, each with its feed entry."""

    hub: Hub
    row: BatchRow
    channel: str
    parent_ts: str | None = None
    progress_ts: str | None = None
    events: asyncio.Queue[tuple[Event, Ack]] = field(default_factory=asyncio.Queue)
    position: int | None = None
    live_workers: int | None = None
    host: str | None = None
    report: dict[str, Any] | None = None
    _unacked: list[Ack] = field(default_factory=list)

    def __post_init__(self) -> None:
        plan = self.row.plan
        rows = [PROBE] if plan.is_probe else [c.approach for c in plan.configs]
        self.progress = ProgressMessage.of(self.row.id, rows)
        self.edits = Coalescer(self.hub.interval)
        self.secrets = redaction.secret_values(os.environ, *(c.env for c in plan.configs))
        self.host = self.row.host
        # The follow loop's polls through an outage: logged once, backed off, as every store
        # call of the thread is (bot.thread.store_retry).
        self.outage = Outage(f"batch {self.row.id}")

    # --- messages ---

    def _parent(self, *, ended: str | None = None, error: str | None = None) -> Message:
        plan = self.row.plan
        return self.scrub(render_message(
            "batch_parent", preset=self.row.preset, batch=self.row.id, who=self.row.requested_by,
            approaches=len(plan.configs), reps=plan.reps, host=self.host, queue=self.row.queue,
            position=self.position, live_workers=self.live_workers, report=self.report,
            ended=ended, error=error, warnings=list(plan.warnings) if not self.report else [],
            probe=None if plan.probe is None else probe_asked(plan.probe),
        ))

    def parent_message(self, *, ended: str | None = None, error: str | None = None) -> Message:
        """The parent as it reads now (at the end: the headline)."""
        return self._parent(ended=ended, error=error)

    def _progress(self, *, final: str | None = None) -> Message:
        return self.scrub(self.progress.render(final=final))

    def scrub(self, message: Message) -> Message:
        """The message with every secret (process env, this batch's env) masked."""
        return redacted(message, self.redact)

    def redact(self, text: str) -> str:
        return redaction.redact(text, secrets=self.secrets)

    # --- lifecycle ---

    async def open(self, submitted: Submitted | None = None) -> None:
        """Post the parent and the progress message (unless a resumed thread has them)."""
        poster, store = self.hub.poster, self.hub.dispatcher.store
        if submitted is not None:
            self.position, self.live_workers = submitted.position, submitted.live_workers
        else:  # resumed: the runs stored so far
            await self._read_records()
        if self.parent_ts is None:
            self.parent_ts = await poster.post(channel=self.channel, thread_ts=None,
                                               message=self._parent())
            if self.hub.durable:
                parent_ts = self.parent_ts
                await patiently(lambda: store.set_thread(self.row.id, self.channel, parent_ts),
                                what=f"thread of {self.row.id}")
        if self.progress_ts is None:
            self.progress_ts = await poster.post(channel=self.channel, thread_ts=self.parent_ts,
                                                 message=self._progress())
            if self.hub.durable:
                progress_ts = self.progress_ts
                await patiently(lambda: store.set_progress_ts(self.row.id, progress_ts),
                                what=f"thread of {self.row.id}")
        self.edits.flushed()

    async def _read_records(self) -> None:
        """The stored runs' rows, read once off the event loop; an outage leaves them to the
        end (they are read again there)."""
        try:
            self.progress.add_records(await off_loop(self.hub.dispatcher.store.records,
                                                     self.row.id))
        except Exception as exc:
            if not is_blip(exc):
                raise
            log.warning("batch %s: no records yet, the store is unreachable (%s)", self.row.id,
                        describe(exc))

    async def follow(self) -> None:
        """Apply events until the batch ends, then post its end (summary, uploads, headline)."""
        # No grace: the thread ends as soon as the store says so (its poll_s is shorter while
        # the store is away: the outage's backoff).
        watch = EndWatch(poll_s=STORE_POLL_S, grace_s=0.0, polled_at=time.monotonic())
        while True:
            wait = self.edits.remaining() if self.edits.is_pending else watch.poll_s
            event: Event | None = None
            entry: Ack = None
            try:
                # not wait_for: on 3.11 it can swallow a cancel that races an event's arrival
                async with asyncio.timeout(wait):
                    event, entry = await self.events.get()
            except TimeoutError:
                event = None
            if event is not None:
                if self._apply(event):
                    self._unacked.append(entry)  # acked once the end is posted
                    break
                self.hub.ack(entry)
            if event is None and watch.poll_due(now := time.monotonic()):
                row, watch.poll_s = await self._poll_store()
                watch.saw(row, now)
                if row is not None and watch.store_says_ended(now):
                    self.row = row
                    break
            if self.edits.is_due():
                await self._flush()
        await self.finish()

    async def _poll_store(self) -> tuple[BatchRow | None, float]:
        """The batch's row (read off the event loop) and the next poll's delay; an outage is
        logged once and backs off (the events keep being applied meanwhile)."""
        try:
            row = await off_loop(self.hub.dispatcher.store.get_batch, self.row.id)
        except Exception as exc:
            return None, self.outage.failed(exc)  # raises anything but an outage
        self.outage.answered()
        return row, STORE_POLL_S

    def _apply(self, event: Event) -> bool:
        """Update the state from one event; True at the batch's end."""
        kind = event.get("type")
        if is_end(event):
            self.report = event.get("report")
            return True
        changed = self.progress.apply(event)
        if kind == "batch.queued":
            self.position = event.get("position", self.position)
            self.edits.parent = changed = True
        elif kind == "batch.started":
            self.host = event.get("host")
            self.edits.parent = True
        self.edits.progress = self.edits.progress or changed
        return False

    async def _flush(self) -> None:
        poster = self.hub.poster
        if self.edits.progress and self.progress_ts is not None:
            self.edits.progress = False
            await poster.update(channel=self.channel, ts=self.progress_ts,
                                message=self._progress())
        if self.edits.parent and self.parent_ts is not None:
            self.edits.parent = False
            await poster.update(channel=self.channel, ts=self.parent_ts, message=self._parent())
        self.edits.flushed()

    async def finish(self) -> None:
        """Post the batch's end once: claimed in the store, each part recorded as it succeeds
        (bot.thread.thread_end)."""
        await finish_thread(self)

    def ack_rest(self) -> None:
        """The thread has ended: its end event and whatever came after are handled."""
        while not self.events.empty():
            self._unacked.append(self.events.get_nowait()[1])
        self.hub.ack(*self._unacked)
        self._unacked.clear()

    async def final_progress(self, state: str) -> None:
        assert self.progress_ts is not None
        store, batch_id = self.hub.dispatcher.store, self.row.id
        self.progress.add_records(await patiently(lambda: store.records(batch_id),
                                                  what=f"summary of {batch_id}"))
        self.edits.progress = False
        await asyncio.sleep(self.edits.remaining())
        self.edits.flushed()
        await self.hub.poster.update(channel=self.channel, ts=self.progress_ts,
                                     message=self._progress(final=state))
