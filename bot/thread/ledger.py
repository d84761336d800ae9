"""Chat posts done exactly once across restarts: each of Slack's side effects is one *part*,
recorded in the store (jobs.store.posts, `slack_parts`) as it starts and as soon as it succeeds.

`Ledger.once(part, attempt)` skips a part recorded `done`; a part recorded `pending` was attempted
by a process that died before it heard Slack's answer, so the message is looked for first
(`find`: a reply carrying the part's metadata marker, or a shared file by name, through
conversations.replies) and attempted again only when it is not there. An attempt Slack refuses
for now (an `ok: false` answer, a dropped connection, a timeout) is retried with backoff until it
succeeds (`persistently`); one it refuses for good (`PERMANENT`) raises `PartFailed` and is left
to the next start. A ledger made with `record_wait_s` (a command's answer: bot.slack.replies)
never holds its answer on the store: it waits at most that long for each record (not at all once
one failed) and goes on while the record is written in the background, retried through an outage
or a full database (`RECORD_PATIENCE_S`), then given up with a log line. Errors:

    PartFailed     Slack refused a part for a reason retrying will not change
    ClaimLost      another bot took the right to post (our claim lapsed)
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from slack_sdk.errors import SlackApiError, SlackClientError

from bot.thread.store_retry import Outage, describe, is_blip, off_loop, patiently
from jobs.store.posts import PartState

log = logging.getLogger(__name__)
T = TypeVar("T")

FIRST_PAUSE_S = 0.5
MAX_PAUSE_S = 10.0  # well inside a summary claim's 30 s, renewed between attempts
MARKER_TYPE = "specbench_part"
RECORD_PATIENCE_S = 15 * 60.0  # how long a record written in the background is retried
_writing: set[asyncio.Task[None]] = set()  # records written in the background (kept referenced)
# Slack's errors that no retry cures (the call, the token or the channel is wrong)
PERMANENT = frozenset({
    "channel_not_found", "not_in_channel", "is_archived", "invalid_auth", "not_authed",
    "account_inactive", "token_revoked", "token_expired", "missing_scope", "invalid_blocks",
    "invalid_arguments", "msg_too_long", "no_text", "message_not_found", "cant_update_message",
    "edit_window_closed", "restricted_action", "invalid_metadata_format",
})


class PartFailed(Exception):
    """Slack refused a part for a reason that retrying will not change."""


class ClaimLost(Exception):
    """Another bot holds the right to post now."""


def marker(scope: str, part: str) -> dict[str, Any]:
    """The metadata a part's message carries, so that it can be found again."""
    return {"event_type": MARKER_TYPE, "event_payload": {"scope": scope, "part": part}}


def slack_error(exc: BaseException) -> str | None:
    return str(exc.response.get("error")) if isinstance(exc, SlackApiError) else None


def is_transient(exc: BaseException) -> bool:
    """Whether Slack (or the way to it) may accept the same call later."""
    if isinstance(exc, SlackApiError):
        return slack_error(exc) not in PERMANENT
    if isinstance(exc, SlackClientError | OSError | TimeoutError):
        return True
    # Slack's async client speaks through aiohttp; where nothing imported it (the console, the
    # CLI), no error of its can be raised, and its import (0.1 s) is spared.
    aiohttp = sys.modules.get("aiohttp")
    return aiohttp is not None and isinstance(exc, aiohttp.ClientError)


async def persistently(
    call: Callable[[], Awaitable[T]], *, what: str,
    between: Callable[[], Awaitable[None]] | None = None,
) -> T:
    """`call()` until it succeeds: a transient failure is retried after 0.5, 1, 2, 4, then
    every 10 s, `between()` (the claim's renewal) before each retry; a permanent one raises
    `PartFailed`."""
    pause, failures = FIRST_PAUSE_S, 0
    while True:
        try:
            result = await call()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not is_transient(exc):
                if slack_error(exc) is not None:
                    raise PartFailed(f"{what}: Slack answered {slack_error(exc)}") from exc
                raise
            failures += 1
            if failures == 1 or failures % 10 == 0:
                log.warning("%s failed (%s: %s, attempt %d); retrying in %.1f s", what,
                            type(exc).__name__, slack_error(exc) or exc, failures, pause)
            await asyncio.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE_S)
            if between is not None:
                await between()
            continue
        if failures:
            log.info("%s done after %d failed attempts", what, failures)
        return result


@dataclass
class Ledger:
    """The recorded parts of one scope (a batch, a digest period, a request); `store` None
    records nothing (the console), `keep` is awaited before each attempt (raise ClaimLost to
    stop)."""

    store: Any
    scope: str
    parts: dict[str, PartState] = field(default_factory=dict)
    keep: Callable[[], Awaitable[None]] | None = None
    # None: each record is awaited (a thread's end); seconds: the most an attempt waits for it
    record_wait_s: float | None = None
    _last_write: asyncio.Task[None] | None = None
    _store_failing: bool = False

    @classmethod
    async def load(cls, store: Any, scope: str,
                   keep: Callable[[], Awaitable[None]] | None = None,
                   record_wait_s: float | None = None) -> Ledger:
        parts = {} if store is None else await patiently(
            lambda: store.slack_parts(scope), what=f"chat parts of {scope}")
        return cls(store=store, scope=scope, parts=parts, keep=keep,
                   record_wait_s=record_wait_s)

    def is_done(self, part: str) -> bool:
        known = self.parts.get(part)
        return known is not None and known.is_done

    async def once(
        self, part: str, attempt: Callable[[], Awaitable[str | None]], *,
        find: Callable[[], Awaitable[str | None]] | None = None,
    ) -> str | None:
        """Do `part` exactly once and return its reference (a ts, a file name)."""
        known = self.parts.get(part)
        if known is not None and known.is_done:
            return known.ref
        what = f"{part} of {self.scope}"
        if self.keep is not None:
            await self.keep()
        if known is not None and find is not None:  # an attempt may have reached Slack
            ref = await persistently(find, what=f"looking for {what}", between=self.keep)
            if ref is not None:
                log.info("%s was posted before (%s); not posted again", what, ref)
                await self._record(part, "done", ref)
                return ref
        await self._record(part, "pending", None)
        ref = await persistently(attempt, what=what, between=self.keep)
        await self._record(part, "done", ref)
        return ref

    async def _record(self, part: str, state: str, ref: str | None) -> None:
        self.parts[part] = PartState(state, ref)
        if self.store is None:
            return
        store, scope, what = self.store, self.scope, f"{part} of {self.scope}"
        write: Callable[[], None] = (
            (lambda: store.finish_part(scope, part, ref)) if state == "done"
            else (lambda: store.begin_part(scope, part)))
        if self.record_wait_s is None:
            await patiently(write, what=what)
            return
        tried = asyncio.Event()
        task = asyncio.get_running_loop().create_task(
            self._write_later(write, what=what, after=self._last_write, tried=tried))
        _writing.add(task)
        task.add_done_callback(_writing.discard)
        self._last_write = task
        if self._store_failing:
            return
        try:
            async with asyncio.timeout(self.record_wait_s):
                await tried.wait()
        except TimeoutError:
            self._store_failing = True
            log.warning("%s: the store did not record it within %.0f s; going on, the record "
                        "is written in the background", what, self.record_wait_s)

    async def _write_later(self, write: Callable[[], None], *, what: str,
                           after: asyncio.Task[None] | None, tried: asyncio.Event) -> None:
        """`write()` once the ledger's earlier record is written (or given up), retried through
        an outage for up to RECORD_PATIENCE_S; `tried` is set once its first try has ended."""
        if after is not None:
            await asyncio.wait({after})
        outage = Outage(what)
        while True:
            try:
                await off_loop(write)
            except Exception as exc:
                tried.set()
                self._store_failing = True
                if not is_blip(exc):
                    log.exception("%s: the store refused its record; not recorded", what)
                    return
                if outage.away_s() > RECORD_PATIENCE_S:
                    log.error("%s: not recorded, the store still refuses it after %.0f s (%s); "
                              "a replay of this request after a restart posts it again", what,
                              outage.away_s(), describe(exc))
                    return
                await asyncio.sleep(outage.failed(exc))
                continue
            tried.set()
            outage.answered()
            return
