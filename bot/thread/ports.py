"""What the pieces of a thread see of each other: the hub as a thread sees it, and the thread as
its end (bot.thread.thread_end) sees it.

Protocols, so that the hub (which makes threads), the thread (which posts its end) and the end
(which works on the thread) each import only this module and not one another: the thread never
needs the hub's reader or tasks, and the end never needs the thread's event loop.
"""

from __future__ import annotations

from typing import Any, Protocol

from bot.thread.messages import Ack, Message, Poster
from jobs.batches.dispatch import Dispatcher, Submitted
from jobs.store import BatchRow


class Hub(Protocol):
    """bot.thread.thread_hub.ThreadHub as one of its threads uses it."""

    dispatcher: Dispatcher
    poster: Poster
    interval: float  # at most one progress edit per batch this often (seconds)
    durable: bool  # False (the console): the store keeps no posting state
    owner: str  # this bot, as the holder of a summary's claim

    def ack(self, *entries: Ack) -> None: ...


class EndingThread(Protocol):
    """bot.thread.batch_thread.BatchThread as the posting of its end uses it."""

    hub: Hub
    row: BatchRow
    channel: str
    parent_ts: str | None
    progress_ts: str | None
    report: dict[str, Any] | None

    async def open(self, submitted: Submitted | None = None) -> None: ...

    def ack_rest(self) -> None: ...

    async def final_progress(self, state: str) -> None: ...

    def parent_message(self, *, ended: str | None = None,
                       error: str | None = None) -> Message: ...

    def scrub(self, message: Message) -> Message: ...

    def redact(self, text: str) -> str: ...
