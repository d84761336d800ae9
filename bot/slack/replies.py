"""A command's answer in Slack, posted once per request across bot restarts.

Slack retries a command it saw no ack for, and replays it with the same trigger_id and
`X-Slack-Retry-Num`; the bot drops a key it has seen in this process at once (bot.slack.app), and
one seen by a predecessor through the store: the answer and each of its uploads are parts of the
request's scope (`request:<key>`, bot.thread.ledger), so that a `digest` replayed after a restart
posts nothing again, and one whose bot died mid-answer is finished. An answer never waits on
that bookkeeping: while the database is away (no answer within `LEDGER_WAIT_S`) a command is
answered all the same, without that record; a record the database refuses to write (a full
volume) is written in the background, retried until it can be, or given up with a log line
(bot.thread.ledger, `record_wait_s`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from bot.chat.router import Reply
from bot.thread.ledger import Ledger
from bot.thread.messages import Message, Poster, upload_steps

REPLY = "reply"
LEDGER_WAIT_S = 2.0  # for the request's record, before answering without it
log = logging.getLogger(__name__)


async def request_ledger(store: Any, key: str | None, *, retried: bool) -> Ledger:
    """The request's recorded parts: kept in the store when the key names one request (Slack's
    unique ID of it, or Slack says it retries), else in memory only."""
    if key is None or not retried:
        return Ledger(store=None, scope="request")
    try:
        return await asyncio.wait_for(
            Ledger.load(store, f"request:{key}", record_wait_s=LEDGER_WAIT_S), LEDGER_WAIT_S)
    except TimeoutError:  # the database away: answer now, unrecorded, rather than not at all
        log.warning("the store did not answer within %.0f s; answering %s unrecorded",
                    LEDGER_WAIT_S, key)
        return Ledger(store=None, scope="request")


def is_answered(ledger: Ledger) -> bool:
    """Whether a predecessor answered this request in full."""
    return ledger.is_done(REPLY) and all(p.is_done for p in ledger.parts.values())


async def answer(
    poster: Poster, ledger: Ledger, *, reply: Reply, channel: str, user: str,
    thread_ts: str | None, button: bool,
) -> str | None:
    """Post the reply (privately when it says so, or to a button's clicker), then its uploads in
    its thread; each part once. The posted reply's ts (None for a private one)."""
    message = Message(text=reply.text, blocks=reply.blocks)
    if reply.ephemeral or button:
        async def whisper() -> str | None:
            await poster.ephemeral(channel=channel, user=user, message=message,
                                   thread_ts=thread_ts)
            return None

        await ledger.once(REPLY, whisper)
        return None

    async def post() -> str | None:
        return await poster.post(channel=channel, thread_ts=thread_ts, message=message)

    ts = await ledger.once(REPLY, post)  # a top-level answer has no thread to look in
    where = thread_ts or ts
    if where is None:
        return ts
    for upload in reply.uploads:
        attempt, find = upload_steps(poster, channel=channel, thread_ts=where, upload=upload)
        await ledger.once(f"upload:{upload.filename}", attempt, find=find)
    return ts

