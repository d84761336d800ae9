"""How the store connects: every connection has a connect and a statement timeout, and a
PostgreSQL connection that stops answering is cut instead of waited on for ever.

- PostgreSQL over libpq (psycopg, psycopg2): `connect_timeout`; `statement_timeout` on the
  server (`options=-c statement_timeout=...`); TCP keepalives and `tcp_user_timeout`, so that a
  dead host or a lost network is seen in seconds (not the kernel's two hours); a pool that waits
  at most the statement timeout for a free connection.
- A server (or a proxy in front of it) that accepts and never answers is seen by none of
  those: the `Watchdog` gives each statement, commit and rollback `statement timeout + GRACE_S`
  seconds and the ping of a pooled connection the connect timeout, then shuts that connection's
  socket down. The blocked call fails with an OperationalError, an outage that callers wait out
  (jobs.store.outage), and the pool is refilled once the database answers again.
- SQLite: a busy timeout of the statement timeout (jobs.store.database).

Settings: SPECBENCH_DB_CONNECT_TIMEOUT_S (default 5), SPECBENCH_DB_STATEMENT_TIMEOUT_S (30). A
parameter already in the URL's query (`?connect_timeout=10`) wins.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import DisconnectionError

log = logging.getLogger(__name__)

GRACE_S = 5.0  # past the server's own statement timeout, before the client cuts
LIBPQ_DRIVERS = frozenset({"psycopg", "psycopg2", "psycopg2cffi"})
MIN_CONNECT_S = 2  # libpq's shortest connect_timeout
TICK_S = 1.0  # how often the watchdog looks, at most
_FRESH = "specbench_fresh"  # connection record info: just connected, no ping needed


@dataclass(frozen=True)
class Timeouts:
    connect_s: float = 5.0
    statement_s: float = 30.0

    @classmethod
    def from_env(cls) -> Timeouts:
        return cls(connect_s=_seconds("SPECBENCH_DB_CONNECT_TIMEOUT_S", cls.connect_s),
                   statement_s=_seconds("SPECBENCH_DB_STATEMENT_TIMEOUT_S", cls.statement_s))

    @property
    def silence_s(self) -> float:
        """How long a connection may stay silent on one call before the watchdog cuts it."""
        return self.statement_s + GRACE_S


def _seconds(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        return default
    return value if value > 0 and math.isfinite(value) else default


def libpq_args(url: URL, timeouts: Timeouts) -> dict[str, Any]:
    """libpq's connection parameters for the timeouts, less those the URL sets itself."""
    options = str(url.query.get("options") or "")
    args: dict[str, Any] = {
        "connect_timeout": max(math.ceil(timeouts.connect_s), MIN_CONNECT_S),
        "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3,
        "tcp_user_timeout": int(timeouts.silence_s * 1000),
    }
    if "statement_timeout" not in options:
        ms = int(timeouts.statement_s * 1000)
        args["options"] = f"{options} -c statement_timeout={ms}".strip()
    return {k: v for k, v in args.items() if k == "options" or k not in url.query}


def create_server_engine(url: URL, timeouts: Timeouts | None = None) -> Engine:
    """The engine of a database server (PostgreSQL, or any other SQLAlchemy backend)."""
    timeouts = timeouts or Timeouts.from_env()
    if url.get_backend_name() != "postgresql" or url.get_driver_name() not in LIBPQ_DRIVERS:
        return create_engine(url, pool_pre_ping=True, pool_timeout=timeouts.statement_s)
    engine = create_engine(url, connect_args=libpq_args(url, timeouts),
                           pool_timeout=timeouts.statement_s)
    WATCHDOG.guard(engine, silence_s=timeouts.silence_s,
                   ping_s=max(timeouts.connect_s, MIN_CONNECT_S))
    return engine


class Watchdog:
    """Cuts a connection that has been silent on one call for longer than its limit."""

    def __init__(self) -> None:
        self._armed: dict[int, tuple[Any, float]] = {}  # id(dbapi connection) -> (it, deadline)
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def guard(self, engine: Engine, *, silence_s: float, ping_s: float) -> None:
        """Watch every connection of `engine`: the pool's own pre-ping is replaced by one here,
        under the watch (SQLAlchemy's runs before any event could arm it)."""

        def arm(dbapi: Any, *_: Any) -> None:
            self.arm(dbapi, silence_s)

        def disarm(dbapi: Any, *_: Any) -> None:
            self.disarm(dbapi)

        def arm_statement(conn: Any, *_: Any) -> None:
            self.arm(_dbapi_of(conn), silence_s)

        def disarm_statement(conn: Any, *_: Any) -> None:
            self.disarm(_dbapi_of(conn))

        def on_connect(dbapi: Any, record: Any) -> None:
            record.info[_FRESH] = True
            self.arm(dbapi, silence_s)  # the dialect's first queries on a new connection

        def on_checkout(dbapi: Any, record: Any, _proxy: Any) -> None:
            self.arm(dbapi, ping_s)  # a ping answers as fast as a connection opens
            if record.info.pop(_FRESH, False):
                return
            try:
                engine.dialect.do_ping(dbapi)
            except engine.dialect.loaded_dbapi.Error as exc:  # the pool reconnects once
                raise DisconnectionError(f"ping failed: {exc}") from exc

        pool = engine.pool
        event.listen(pool, "connect", on_connect)
        event.listen(pool, "checkout", on_checkout)
        event.listen(pool, "reset", arm)  # the rollback of a connection given back
        for name in ("checkin", "invalidate", "close"):
            event.listen(pool, name, disarm)
        for name in ("before_cursor_execute", "commit", "rollback"):
            event.listen(engine, name, arm_statement)
        event.listen(engine, "after_cursor_execute", disarm_statement)

    def arm(self, dbapi: Any, seconds: float) -> None:
        if dbapi is None:
            return
        with self._cond:
            self._armed[id(dbapi)] = (dbapi, time.monotonic() + seconds)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="specbench-db-watchdog",
                                                daemon=True)
                self._thread.start()

    def disarm(self, dbapi: Any) -> None:
        if dbapi is None:
            return
        with self._cond:
            self._armed.pop(id(dbapi), None)

    def _watch(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for key, (dbapi, deadline) in list(self._armed.items()):
                    if deadline <= now:
                        del self._armed[key]
                        cut(dbapi)  # under the lock: its owner cannot start another call first
                soonest = min((d for _, d in self._armed.values()), default=now + TICK_S)
                self._cond.wait(timeout=min(max(soonest - time.monotonic(), 0.05), TICK_S))


def _dbapi_of(conn: Any) -> Any:
    """The DBAPI connection under a SQLAlchemy Connection; None once invalidated or closed
    (asking for it then would reconnect)."""
    if conn.invalidated or conn.closed:
        return None
    return conn.connection.dbapi_connection


def cut(dbapi: Any) -> None:
    """Shut the connection's socket down: the call blocked on it fails at once."""
    try:
        fd = dbapi.fileno()
    except Exception:  # noqa: BLE001 - closed already: nothing to cut
        return
    log.warning("a database connection stayed silent past its timeout; cutting it")
    with contextlib.suppress(OSError), socket.socket(fileno=os.dup(fd)) as sock:
        sock.shutdown(socket.SHUT_RDWR)


WATCHDOG = Watchdog()
