"""A database outage, and the one rule every caller follows through it.

A store call that fails because the database is unreachable for now (`is_outage`: refused,
reset, a connect or statement timeout, a hung connection cut by `jobs.store.connections`'s
watchdog, no free connection in the pool, a full volume that refuses writes: `is_full`) is tried
again after 0.5, 1, 2, 4, then every 5 s; any other error is raised at once. One warning when an
outage starts, one line when the store answers again (`Outage`). Two callers:

- the worker's store (`jobs.store.patient.PatientStore`, embedded and Celery): a batch's reads
  and writes wait up to `patience_s()` (SPECBENCH_DB_PATIENCE_S, default 15 minutes), so that an
  outage delays a batch instead of failing it (`wait_out`);
- the bot's threads (`bot.thread.store_retry`): the same pauses, off the event loop, for as
  long as the thread lives; a command's answer never waits for them (bot.thread.ledger's
  `record_wait_s`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from jobs import settings

log = logging.getLogger(__name__)
T = TypeVar("T")

FIRST_PAUSE_S = 0.5
MAX_PAUSE_S = 5.0
DEFAULT_PATIENCE_S = 15 * 60.0
_OUTAGES = (OperationalError, InterfaceError, DisconnectionError, PoolTimeout, ConnectionError,
            TimeoutError)


def is_outage(exc: BaseException) -> bool:
    """Whether `exc` says the database is unreachable for now (not that a call was wrong)."""
    if isinstance(exc, _OUTAGES):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


def is_full(exc: BaseException) -> bool:
    """Whether `exc` says the database's volume is full (PostgreSQL's disk_full, SQLSTATE
    53100; SQLite's SQLITE_FULL): writes fail until space is freed, reads go on."""
    orig = getattr(exc, "orig", None)
    return (getattr(orig, "sqlstate", None) == "53100"
            or "database or disk is full" in str(orig if orig is not None else exc))


def describe(exc: BaseException) -> str:
    """The error's first line, short (SQLAlchemy's messages go on with the SQL and a URL)."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:200] if lines else ''}"


def next_pause(pause: float) -> float:
    return min(pause * 2, MAX_PAUSE_S)


def patience_s() -> float:
    """How long a batch's store call waits for the database (SPECBENCH_DB_PATIENCE_S)."""
    return settings.seconds("SPECBENCH_DB_PATIENCE_S", default=DEFAULT_PATIENCE_S, least=0.0)


class Outage:
    """One caller's view of an outage: the pause before its next try, logged once."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.since: float | None = None
        self.pause = FIRST_PAUSE_S

    def failed(self, exc: BaseException) -> float:
        """Seconds to wait before trying again; raises `exc` unless it is an outage."""
        if not is_outage(exc):
            raise exc
        if self.since is None:
            self.since = time.monotonic()
            log.warning("%s: the store is %s (%s); retrying", self.what,
                        "full" if is_full(exc) else "unreachable", describe(exc))
        pause, self.pause = self.pause, next_pause(self.pause)
        return pause

    def answered(self) -> None:
        if self.since is not None:
            log.info("%s: the store answered again after %.1f s", self.what,
                     time.monotonic() - self.since)
        self.since, self.pause = None, FIRST_PAUSE_S

    def away_s(self) -> float:
        return 0.0 if self.since is None else time.monotonic() - self.since


def wait_out(call: Callable[[], T], *, what: str, patience: float | None = None) -> T:
    """`call()`, tried again through an outage for up to `patience` seconds (default:
    `patience_s()`); the outage's last error once that has passed."""
    limit = patience_s() if patience is None else patience
    outage = Outage(what)
    while True:
        try:
            result = call()
        except Exception as exc:
            pause = outage.failed(exc)
            if outage.away_s() + pause > limit:
                log.error("%s: the store is still unreachable after %.0f s; giving up", what,
                          outage.away_s())
                raise
            time.sleep(pause)
            continue
        outage.answered()
        return result
