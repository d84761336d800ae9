"""The Slack Web API client and the thread `Poster` over it.

`make_client` is the one place a Web API client is made: the Bolt app and the digest post both
take theirs here. Every client calls SLACK_API_URL (Slack's own API unless set: the tests' stand-in
sets it), retries a dropped connection twice, and waits out rate limits (HTTP 429 and its
Retry-After) up to five times.
"""

from __future__ import annotations

import os

from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.thread.messages import Message, Upload
from jobs.core.messages import slack_escape

SLACK_API = "https://slack.com/api/"


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
            unfurl_links=False,
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

    async def ephemeral(
        self, *, channel: str, user: str, message: Message, thread_ts: str | None = None
    ) -> None:
        await self.client.chat_postEphemeral(channel=channel, user=user, text=_text(message),
                                             blocks=message.blocks, thread_ts=thread_ts)


def _text(message: Message) -> str:
    """The message's `text` field: its fallback, or its text escaped (a code block when it is
    several lines with no blocks)."""
    if message.fallback is not None:
        return message.fallback
    if message.blocks is None and "\n" in message.text.strip():
        return f"```{slack_escape(message.text.rstrip())}```"
    return slack_escape(message.text)
