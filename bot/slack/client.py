"""The Slack Web API client and the thread `Poster` over it.

`make_client` is the one place a Web API client is made: the Bolt app and the digest post both
take theirs here. Every client calls SLACK_API_URL (Slack's own API unless set: the tests' stand-in
sets it), retries a dropped connection twice, and waits out rate limits (HTTP 429 and its
Retry-After) up to five times.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.thread.messages import Message, Upload
from jobs.core.messages import slack_escape

SLACK_API = "https://slack.com/api/"
# conversations.replies' answers for a token that may not read the thread: nothing is found
UNREADABLE = frozenset({"missing_scope", "not_in_channel", "channel_not_found", "not_allowed",
                        "thread_not_found"})
log = logging.getLogger(__name__)


def make_client(token: str | None, *, api_url: str | None = None) -> AsyncWebClient:
    """A Web API client on `api_url`, SLACK_API_URL or Slack's own, that waits out 429s."""
    base = api_url or os.environ.get("SLACK_API_URL") or SLACK_API
    return AsyncWebClient(
        token=token, base_url=base.rstrip("/") + "/",
        retry_handlers=[AsyncConnectionErrorRetryHandler(max_retry_count=2),
                        AsyncRateLimitErrorRetryHandler(max_retry_count=5)],
    )


class SlackPoster:
    """bot.thread.messages' Poster over the Web API."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client

    async def post(self, *, channel: str, thread_ts: str | None, message: Message) -> str:
        response = await self.client.chat_postMessage(
            channel=channel, thread_ts=thread_ts, text=_text(message), blocks=message.blocks,
            unfurl_links=False, metadata=message.metadata,
        )
        return str(response["ts"])

    async def update(self, *, channel: str, ts: str, message: Message) -> None:
        await self.client.chat_update(channel=channel, ts=ts, text=_text(message),
                                      blocks=message.blocks)

    async def upload(self, *, channel: str, thread_ts: str, files: list[Upload]) -> None:
        await self.client.files_upload_v2(
            channel=channel, thread_ts=thread_ts, request_file_info=False,
            file_uploads=[{"content": f.content, "filename": f.filename, "title": f.title}
                          for f in files],
        )

    async def find_reply(
        self, *, channel: str, thread_ts: str, metadata: dict[str, Any] | None = None,
        filename: str | None = None,
    ) -> str | None:
        """conversations.replies, page by page, for a reply with `metadata`'s payload or a
        shared file named `filename`. It needs a history scope (channels:history,
        groups:history); without one (`missing_scope`) nothing is found."""
        cursor: str | None = None
        while True:
            try:
                response = await self.client.conversations_replies(
                    channel=channel, ts=thread_ts, include_all_metadata=True, limit=200,
                    cursor=cursor)
            except SlackApiError as exc:
                if exc.response.get("error") in UNREADABLE:
                    log.warning("cannot read thread %s (%s): a part whose attempt may have "
                                "reached Slack is attempted again", thread_ts,
                                exc.response.get("error"))
                    return None
                raise
            for reply in response.get("messages") or []:
                if _is_match(reply, metadata=metadata, filename=filename):
                    return str(reply.get("ts"))
            cursor = (response.get("response_metadata") or {}).get("next_cursor") or None
            if cursor is None:
                return None

    async def ephemeral(
        self, *, channel: str, user: str, message: Message, thread_ts: str | None = None
    ) -> None:
        await self.client.chat_postEphemeral(channel=channel, user=user, text=_text(message),
                                             blocks=message.blocks, thread_ts=thread_ts)


def _is_match(reply: dict[str, Any], *, metadata: dict[str, Any] | None,
              filename: str | None) -> bool:
    if metadata is not None:
        found = reply.get("metadata") or {}
        if (found.get("event_type") == metadata.get("event_type")
                and found.get("event_payload") == metadata.get("event_payload")):
            return True
    return filename is not None and any(
        f.get("name") == filename for f in reply.get("files") or [])


def _text(message: Message) -> str:
    """The message's `text` field: its fallback, or its text escaped (a code block when it is
    several lines with no blocks)."""
    if message.fallback is not None:
        return message.fallback
    if message.blocks is None and "\n" in message.text.strip():
        return f"```{slack_escape(message.text.rstrip())}```"
    return slack_escape(message.text)
