"""The hub: every chat thread of one bot or console, fed by one subscription to all events
(or a durable `Feed` in distributed mode), with one asyncio task per followed batch. A thread
that meets a database blip is not dropped: it waits (with backoff) and carries on."""

from __future__ import annotations

import asyncio
import functools
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from bot.thread.batch_thread import BatchThread
from bot.thread.messages import Ack, Feed, Poster
from bot.thread.store_retry import Outage, patiently
from jobs.batches.dispatch import Dispatcher, Submitted
from jobs.core.events import Event
from jobs.ops.owners import process_owner
from jobs.store import TERMINAL_STATES

log = logging.getLogger(__name__)

EARLY_BATCHES = 100  # batches whose events wait for their thread to open, at most


class ThreadHub:
    """Every thread of one bot: one subscription to all events (or a durable `Feed`), one task
    per batch."""

    def __init__(
        self, dispatcher: Dispatcher, poster: Poster, *, interval: float = 2.0,
        durable: bool = True, feed: Feed | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.owner = process_owner()  # this bot, as the holder of a summary's claim
        self.durable = durable  # False (the console): the store keeps no posting state
        self.poster = poster
        self.interval = interval
        self.feed = feed
        self.threads: dict[str, BatchThread] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None
        self._subscription: Any = None
        # Events of batches no thread follows yet (a submit races its thread's opening).
        self._early: dict[str, list[tuple[Event, Ack]]] = {}
        self._acks: queue.SimpleQueue[str] = queue.SimpleQueue()  # handled, to ack (reader)
        self._foreign: set[str] = set()  # batches no chat thread of ours will ever follow

    def start(self) -> None:
        """Subscribe to every event (before any submit) and start the reader thread."""
        if self._reader is not None:
            return
        self._loop = asyncio.get_running_loop()
        if self.feed is None:
            self._subscription = self.dispatcher.subscribe()
            target: Callable[[], None] = self._read
        else:
            target = self._read_feed
        self._reader = threading.Thread(target=target, name="specbench-events", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            event = self._subscription.get(timeout=0.2)
            if event is not None and not self._hand_over(event, None):
                return

    def _read_feed(self) -> None:
        """The durable path: entries no thread of ours will handle are acked here at once."""
        assert self.feed is not None
        while not self._stop.is_set():
            try:
                self._flush_acks()
                for entry in self.feed.read(0.2):
                    if not self._is_followed(str(entry.event.get("batch"))):
                        self.feed.ack(entry.id)
                    elif not self._hand_over(entry.event, entry.id):
                        return
            except Exception:  # noqa: BLE001 - unacked entries come back; keep following
                log.warning("reading the event feed failed; retrying", exc_info=True)
                self._stop.wait(1.0)
        self._flush_acks()

    def _flush_acks(self) -> None:
        assert self.feed is not None
        done: list[str] = []
        while True:
            try:
                done.append(self._acks.get_nowait())
            except queue.Empty:
                break
        if done:
            try:
                self.feed.ack(*done)
            except Exception:  # noqa: BLE001 - unacked entries come back; nothing is lost
                log.warning("could not acknowledge %d events", len(done), exc_info=True)

    def _is_followed(self, batch: str) -> bool:
        """Whether a chat thread follows (or will follow) this batch: it was launched from a
        channel and its summary is not posted yet. Runs on the reader thread (it reads the
        store)."""
        if batch in self._foreign:
            return False
        store = self.dispatcher.store
        try:
            row = store.get_batch(batch)
            posts = store.slack_posts(batch) if row is not None else None
        except Exception:  # noqa: BLE001 - a store hiccup: let the thread (if any) decide
            log.warning("could not look batch %s up", batch, exc_info=True)
            return True
        if row is None or row.channel is None or (posts and posts.summary_posted_at):
            self._foreign.add(batch)
            while len(self._foreign) > 10 * EARLY_BATCHES:
                self._foreign.pop()
            return False
        return True

    def _hand_over(self, event: Event, entry: Ack) -> bool:
        """Pass an event to the event loop; False once the loop has closed."""
        if self._loop is None:
            return False
        try:
            self._loop.call_soon_threadsafe(self._deliver, event, entry)
        except RuntimeError:  # the loop closed under us
            return False
        return True

    def ack(self, *entries: Ack) -> None:
        """Events handled: the reader thread acknowledges them to the feed."""
        if self.feed is not None:
            for entry in entries:
                if entry is not None:
                    self._acks.put(entry)

    def _deliver(self, event: Event, entry: Ack = None) -> None:
        batch = str(event.get("batch"))
        thread = self.threads.get(batch)
        if thread is not None:
            thread.events.put_nowait((event, entry))
            return
        if batch in self._foreign:
            self.ack(entry)
            return
        self._early.setdefault(batch, []).append((event, entry))
        while len(self._early) > EARLY_BATCHES:
            dropped = self._early.pop(next(iter(self._early)))
            self.ack(*(e for _, e in dropped))

    def open(self, submitted: Submitted, *, channel: str) -> asyncio.Task[None]:
        """Open and follow the thread of a batch just submitted."""
        thread = BatchThread(hub=self, row=submitted.batch, channel=channel)
        self.threads[submitted.batch.id] = thread
        for item in self._early.pop(submitted.batch.id, []):
            thread.events.put_nowait(item)
        return self._spawn(thread, thread.open(submitted))

    async def catch_up(self) -> list[str]:
        """Resume the threads whose summary is not posted: finished ones post it now. The
        store is read off the event loop and waited for through an outage."""
        resumed: list[str] = []
        if not self.durable:
            return resumed
        store = self.dispatcher.store
        for row in await patiently(store.unposted_threads, what="catching up on threads"):
            if row.id in self.threads or row.channel is None:
                continue
            posts = await patiently(functools.partial(store.slack_posts, row.id),
                                    what=f"thread of {row.id}")
            if row.id in self.threads:  # opened while we waited
                continue
            thread = BatchThread(hub=self, row=row, channel=row.channel, parent_ts=row.thread_ts,
                                 progress_ts=posts.progress_ts if posts else None)
            self.threads[row.id] = thread
            for item in self._early.pop(row.id, []):
                thread.events.put_nowait(item)
            self._spawn(thread, thread.open())
            resumed.append(row.id)
        return resumed

    def _spawn(self, thread: BatchThread, opening: Any) -> asyncio.Task[None]:
        async def run() -> None:
            step, outage = opening, Outage(f"thread of batch {thread.row.id}")
            try:
                while True:
                    try:
                        await step
                        if thread.row.state in TERMINAL_STATES:
                            await thread.finish()
                        else:
                            await thread.follow()
                        break
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:
                        # Through an outage (anything else is raised), the house's backoff;
                        # open() and follow() resume where they were, finish() posts once.
                        await asyncio.sleep(outage.failed(exc))
                        step = thread.open()
                self._foreign.add(thread.row.id)  # ended: its late events need no thread
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("thread of batch %s failed", thread.row.id)
            finally:
                self.threads.pop(thread.row.id, None)
                self.tasks.pop(thread.row.id, None)

        task = asyncio.get_running_loop().create_task(run(), name=f"thread-{thread.row.id}")
        self.tasks[thread.row.id] = task
        return task

    async def wait(self, batch_id: str) -> None:
        task = self.tasks.get(batch_id)
        if task is not None:
            await asyncio.shield(task)

    async def close(self) -> None:
        """Stop following (a bot going down); the store keeps what a successor needs."""
        self._stop.set()
        pending = set(self.tasks.values())
        while pending:  # again for a task whose cancel was swallowed by a library
            for task in pending:
                task.cancel()
            _, pending = await asyncio.wait(pending, timeout=1.0)
        if self._reader is not None:
            await asyncio.to_thread(self._reader.join, 2.0)
        if self._subscription is not None:
            self._subscription.close()
        if self.feed is not None:
            self.feed.close()
