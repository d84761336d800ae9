"""A chat thread's store calls through a database blip: retried with backoff, never fatal.

The store is the thread's memory (what it posted, whether the batch ended): a thread that gave up
on a blip would leave its summary to the next bot start. `patiently(call)` retries a call that
failed for the database being unreachable (`is_blip`) after 0.5, 1, 2, 4, then every 5 s until
it answers or the thread is cancelled; any other error is raised as before. One warning per
outage, one line when the store is back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

log = logging.getLogger(__name__)
T = TypeVar("T")

FIRST_PAUSE_S = 0.5
MAX_PAUSE_S = 5.0
_BLIPS = (OperationalError, InterfaceError, DisconnectionError, PoolTimeout, ConnectionError,
          TimeoutError)


def is_blip(exc: BaseException) -> bool:
    """Whether `exc` says the database is unreachable for now (not that a call was wrong)."""
    if isinstance(exc, _BLIPS):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


def describe(exc: BaseException) -> str:
    """The error's first line, short (SQLAlchemy's messages go on with the SQL and a URL)."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:200] if lines else ''}"


def next_pause(pause: float) -> float:
    return min(pause * 2, MAX_PAUSE_S)


async def patiently(call: Callable[[], T], *, what: str) -> T:
    """`call()`, retried with backoff while the database is unreachable."""
    pause = FIRST_PAUSE_S
    since: float | None = None
    while True:
        try:
            result = call()
        except Exception as exc:
            if not is_blip(exc):
                raise
            if since is None:
                since = time.monotonic()
                log.warning("%s: the store is unreachable (%s); retrying", what, describe(exc))
            await asyncio.sleep(pause)
            pause = next_pause(pause)
            continue
        if since is not None:
            log.info("%s: the store answered again after %.1f s", what, time.monotonic() - since)
        return result
