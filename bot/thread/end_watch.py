"""When a followed batch has ended: one rule for the three that follow a batch to its end, the
CLI's `run` (bot.cli.commands), the console's wait (bot.console) and a chat thread
(bot.thread.batch_thread).

An end event says so at once (`is_end`). The store is the truth besides: asked every `poll_s`
(`EndWatch.poll_due`), a batch it says has ended is taken as ended once `grace_s` has passed
without the end event (Redis went away as the batch ended; the event, with its report, may yet
come). A store away for now answers nothing (`stored_row`) and the next poll asks again: an
outage delays the end, never fails the wait. Each follower keeps its own way of waiting (a
subscription, an asyncio queue, a thread's task); what ends the wait is decided here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bot.thread.store_retry import is_blip
from jobs.core.events import Event
from jobs.core.plans import BatchRow
from jobs.store import TERMINAL_STATES

END_EVENTS = ("batch.finished", "batch.cancelled")


def is_end(event: Event) -> bool:
    """Whether `event` is its batch's end (finished or cancelled, with the report)."""
    return event.get("type") in END_EVENTS


class BatchReader(Protocol):
    def get_batch(self, batch_id: str) -> BatchRow | None: ...


def stored_row(store: BatchReader, batch_id: str) -> BatchRow | None:
    """The batch's row, or None while the store is unreachable (the next poll tries again);
    any other error is raised."""
    try:
        return store.get_batch(batch_id)
    except Exception as exc:
        if not is_blip(exc):
            raise
        return None


@dataclass
class EndWatch:
    """One follower's view of the store while it waits for a batch's end event. Times are the
    follower's clock (time.monotonic or the event loop's)."""

    poll_s: float  # how often the store is asked (a follower may back off by changing it)
    grace_s: float  # the end event's head start once the store says the batch ended
    polled_at: float  # when the store was last asked (at first: when the wait began)
    row: BatchRow | None = None  # the last row the store gave
    ended_at: float | None = None  # when the store first said the batch had ended

    def poll_due(self, now: float) -> bool:
        """Whether to ask the store now: `poll_s` since the last time, and it has not yet
        said the batch ended."""
        return self.ended_at is None and now - self.polled_at >= self.poll_s

    def saw(self, row: BatchRow | None, now: float) -> BatchRow | None:
        """The store was asked at `now` and gave `row` (None: it was away, or has no such
        batch); returns `row`."""
        self.polled_at = now
        if row is not None:
            self.row = row
            if self.ended_at is None and row.state in TERMINAL_STATES:
                self.ended_at = now
        return row

    def store_says_ended(self, now: float) -> bool:
        """Whether the wait is over on the store's word: it said so `grace_s` ago."""
        return self.ended_at is not None and now - self.ended_at >= self.grace_s
