"""What a chat thread posts and where: `Message` and `Upload`, the `Poster` they go to (Slack or
the console), and the durable `Feed` of events a thread may read from.

A message is rendered from one template (`render_message`) and scrubbed of secrets
(`redacted`) before any poster sees it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from jobs.core.events import Event
from jobs.core.messages import render_blocks, render_text


@dataclass(frozen=True)
class Message:
    """One message: `text` is what a terminal shows, `blocks` what Slack shows."""

    text: str
    blocks: list[dict[str, Any]] | None = None
    fallback: str | None = None  # Slack's notification text (defaults to `text`)
    # Slack's message metadata: a marker that finds the message again (bot.thread.ledger)
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True)
class Upload:
    filename: str
    content: bytes
    title: str


class Poster(Protocol):
    """Where a thread goes; returns message IDs (Slack's `ts`)."""

    async def post(self, *, channel: str, thread_ts: str | None, message: Message) -> str: ...

    async def update(self, *, channel: str, ts: str, message: Message) -> None: ...

    async def upload(self, *, channel: str, thread_ts: str, files: list[Upload]) -> None: ...

    async def find_reply(
        self, *, channel: str, thread_ts: str, metadata: dict[str, Any] | None = None,
        filename: str | None = None,
    ) -> str | None:
        """The ts of a reply in the thread that carries `metadata` (its event_payload) or shares
        a file named `filename`; None when there is none, or when this poster cannot read
        threads (then a part whose attempt may have reached Slack is attempted again)."""
        ...

    async def ephemeral(
        self, *, channel: str, user: str, message: Message, thread_ts: str | None = None
    ) -> None: ...


class FeedEntry(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def event(self) -> Event: ...


class Feed(Protocol):
    """A durable event source (jobs.broker.streams.StreamReader): entries stay pending until
    acked."""

    def read(self, timeout: float) -> Sequence[FeedEntry]: ...

    def ack(self, *entry_ids: str) -> None: ...

    def close(self) -> None: ...


Ack = str | None  # the feed entry an event came from; None without a durable feed


Step = Callable[[], Awaitable[str | None]]  # one attempt at a part, or the look for it


def upload_steps(
    poster: Poster, *, channel: str, thread_ts: str, upload: Upload,
) -> tuple[Step, Step]:
    """One file's upload into a thread, and the look for it there by its name: the two steps of
    a once-only part (bot.thread.ledger)."""

    async def attempt() -> str | None:
        await poster.upload(channel=channel, thread_ts=thread_ts, files=[upload])
        return upload.filename

    async def find() -> str | None:
        found = await poster.find_reply(channel=channel, thread_ts=thread_ts,
                                        filename=upload.filename)
        return None if found is None else upload.filename

    return attempt, find


def render_message(name: str, **context: Any) -> Message:
    """Template `name` as a message: its text (`.txt.j2`) and its blocks (`.slack.j2`)."""
    text = render_text(name, **context)
    payload = render_blocks(name, fallback=text, text=text, **context)
    return Message(text=text, blocks=payload["blocks"])


def redacted(message: Message, redact: Callable[[str], str]) -> Message:
    """The message with `redact` applied to its text, every string in its blocks, and its
    fallback."""
    return Message(
        text=redact(message.text),
        blocks=None if message.blocks is None else _redact_tree(message.blocks, redact),
        fallback=None if message.fallback is None else redact(message.fallback),
        metadata=message.metadata,
    )


def _redact_tree(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redact_tree(v, redact) for v in value]
    if isinstance(value, dict):
        return {k: _redact_tree(v, redact) for k, v in value.items()}
    return value
