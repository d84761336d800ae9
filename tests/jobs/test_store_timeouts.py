"""Every store connection has a connect and a statement timeout (issue 20, item 1).

A real PostgreSQL behind a TCP proxy the test owns: hung (it accepts and never answers, on new
connections and open ones) a store call fails within the connection's timeouts instead of
waiting for ever, a statement already sent is cut by the watchdog, refused it fails at once, and
the same store works again once the proxy is restored. The worker's patient store waits a hang
out and its write lands, and an embedded batch (real stand-in servers) completes through a hang
and through a refusal: each of those outages lasts until the store has found the database away
and tried again (`Restorer`), not a fixed time. Skipped without PostgreSQL (unless
SPECBENCH_REQUIRE_POSTGRES=1).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.store import Store
from jobs.store.connections import GRACE_S, Timeouts, libpq_args
from jobs.store.outage import is_outage
from jobs.store.patient import PatientStore
from tests.conftest import make_plan
from tests.standin.harness import make_standin
from tests.standin.postgres import fresh_database
from tests.standin.tcp_proxy import TcpProxy

CONNECT_S, STATEMENT_S = 2.0, 2.0
RETRIED_S = 1.0  # an outage lasts this long past the store's first failed call: two tries fail
GIVE_UP_S = 60.0  # a store that never noticed the outage: restored anyway, and the test fails


class Restorer(logging.Handler):
    """Restores `proxy` RETRIED_S after a batch's store logged that it found the database away
    (jobs.store.outage's "the store is unreachable"): the outage outlasts a failed call and a
    retry, whatever the call's timeouts, and no longer. Only warnings after `arm()` count."""

    def __init__(self, proxy: TcpProxy) -> None:
        super().__init__(logging.WARNING)
        self.proxy = proxy
        self.armed = threading.Event()
        self.noticed = threading.Event()
        self.restored = threading.Event()
        self._once = threading.Lock()
        self.restoring_at: float | None = None  # time.monotonic() just before the restore

    def arm(self) -> None:
        self.armed.set()
        self._later(GIVE_UP_S)

    def emit(self, record: logging.LogRecord) -> None:
        if self.armed.is_set() and not self.noticed.is_set() \
                and "the store is unreachable" in record.getMessage():
            self.noticed.set()
            self._later(RETRIED_S)

    def _later(self, seconds: float) -> None:
        timer = threading.Timer(seconds, self.restore)
        timer.daemon = True
        timer.start()

    def restore(self) -> None:
        with self._once:
            if self.restoring_at is not None:
                return
            self.restoring_at = time.monotonic()
        self.proxy.restore()
        self.restored.set()

    def __enter__(self) -> Restorer:
        logging.getLogger("jobs.store.outage").addHandler(self)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        logging.getLogger("jobs.store.outage").removeHandler(self)
        self.restore()


def test_libpq_gets_every_timeout_and_the_url_wins() -> None:
    timeouts = Timeouts(connect_s=4, statement_s=12)
    args = libpq_args(make_url("postgresql+psycopg://u@h/db"), timeouts)
    assert args["connect_timeout"] == 4
    assert args["options"] == "-c statement_timeout=12000"
    assert args["keepalives"] == 1 and args["keepalives_idle"] > 0
    assert args["tcp_user_timeout"] == int((12 + GRACE_S) * 1000)
    mine = make_url("postgresql+psycopg://u@h/db?connect_timeout=9&options=-c%20search_path%3Dx")
    args = libpq_args(mine, timeouts)
    assert "connect_timeout" not in args
    assert args["options"] == "-c search_path=x -c statement_timeout=12000"
    set_by_url = make_url("postgresql+psycopg://u@h/db?options=-c%20statement_timeout%3D1")
    assert "options" not in libpq_args(set_by_url, timeouts)


def test_timeouts_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_DB_CONNECT_TIMEOUT_S", "7")
    monkeypatch.setenv("SPECBENCH_DB_STATEMENT_TIMEOUT_S", "nonsense")
    assert Timeouts.from_env() == Timeouts(connect_s=7, statement_s=Timeouts.statement_s)


def test_sqlite_waits_for_a_lock_as_long_as_a_statement_may_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECBENCH_DB_STATEMENT_TIMEOUT_S", "3")
    store = Store(f"sqlite:///{tmp_path}/busy.db")
    with store._read() as session:
        assert session.execute(text("PRAGMA busy_timeout")).scalar() == 3000
    store.close()


@pytest.fixture
def proxied(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Store, TcpProxy, str]]:
    """A migrated store on a fresh database through a proxy, with short timeouts."""
    monkeypatch.setenv("SPECBENCH_DB_CONNECT_TIMEOUT_S", str(CONNECT_S))
    monkeypatch.setenv("SPECBENCH_DB_STATEMENT_TIMEOUT_S", str(STATEMENT_S))
    with fresh_database("specbench_timeouts") as created:
        url = make_url(created)
        with TcpProxy(url.host or "127.0.0.1", url.port or 5432) as proxy:
            through = url.set(host="127.0.0.1", port=proxy.port)
            store = Store(through.render_as_string(hide_password=False))
            store.migrate()
            try:
                yield store, proxy, created
            finally:
                store.close()


def timed_error(call: object) -> tuple[float, BaseException]:
    began = time.monotonic()
    with pytest.raises(Exception) as caught:  # noqa: PT011 - which error is checked below
        call()  # type: ignore[operator]
    return time.monotonic() - began, caught.value


@pytest.mark.postgres
@pytest.mark.timeout(90)
def test_a_hung_database_fails_a_call_within_its_timeouts(
    proxied: tuple[Store, TcpProxy, str]
) -> None:
    store, proxy, _ = proxied
    assert store.get_batch("b-none") is None  # a pooled connection, for the ping to find
    proxy.hang()
    took, error = timed_error(lambda: store.get_batch("b-none"))
    # the pooled connection's ping is cut after the connect timeout, then a new connection
    # times out connecting: the call fails while the database still hangs (one that waited
    # for it would hang until the test's timeout), and never before the connect timeout
    assert is_outage(error), error
    assert took >= CONNECT_S, took
    took, error = timed_error(lambda: store.get_batch("b-none"))
    assert is_outage(error) and took >= CONNECT_S, took
    proxy.restore()
    assert store.get_batch("b-none") is None


@pytest.mark.postgres
@pytest.mark.timeout(90)
def test_a_statement_sent_to_a_database_that_hangs_is_cut(
    proxied: tuple[Store, TcpProxy, str]
) -> None:
    store, proxy, _ = proxied
    sent = threading.Event()

    def slow_then_hang() -> None:
        with store._read() as session:
            session.execute(text("SELECT 1"))
            proxy.hang()
            sent.set()
            session.execute(text("SELECT 2"))  # the server never sees it

    took, error = timed_error(slow_then_hang)
    assert sent.is_set()
    assert isinstance(error, OperationalError) and is_outage(error)
    assert took >= STATEMENT_S, took  # cut by its timeout while the database still hangs
    proxy.restore()
    assert store.get_batch("b-none") is None


@pytest.mark.postgres
@pytest.mark.timeout(90)
def test_a_database_that_refuses_fails_a_call_at_once(
    proxied: tuple[Store, TcpProxy, str]
) -> None:
    store, proxy, _ = proxied
    assert store.get_batch("b-none") is None
    proxy.cut()
    for _ in range(2):  # refused: an outage at once, whatever the patience (none here)
        _, error = timed_error(lambda: store.get_batch("b-none"))
        assert is_outage(error)
    proxy.restore()
    assert store.get_batch("b-none") is None


@pytest.mark.postgres
@pytest.mark.timeout(120)
def test_the_patient_store_waits_a_hang_out_and_its_write_lands(
    proxied: tuple[Store, TcpProxy, str]
) -> None:
    store, proxy, direct_url = proxied
    patient = PatientStore.over(store)
    row, _ = patient.create_batch(batch_id="b-hang", preset="p", engine="local", queue="q",
                                  requested_by="t", plan=make_plan())
    with Restorer(proxy) as restorer:
        proxy.hang()
        restorer.arm()
        assert patient.set_state(row.id, "running", host="h")
        answered_at = time.monotonic()
    assert restorer.noticed.is_set(), "the hang went unnoticed"
    assert restorer.restoring_at is not None and answered_at > restorer.restoring_at, \
        "it answered while the database hung"
    direct = Store(direct_url)
    try:
        stored = direct.get_batch(row.id)
        assert stored is not None and stored.state == "running" and stored.host == "h"
    finally:
        direct.close()


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("outage", ["hang", "refused"])
def test_an_embedded_batch_waits_its_database_out_and_completes(
    proxied: tuple[Store, TcpProxy, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    outage: str,
) -> None:
    """The embedded worker (what `specbench run` and a bot without Redis use) loses its database
    while the second configuration runs, until a store call has failed on its timeouts and been
    tried again; the batch completes."""
    store, proxy, direct_url = proxied
    standin = make_standin(tmp_path, monkeypatch)
    plan = standin.plan(standin.config("baseline", role="baseline"),
                        standin.config("second", env={"STANDIN_THROUGHPUT": "90"}),
                        standin.config("third", env={"STANDIN_THROUGHPUT": "70"}))
    dispatcher = EmbeddedDispatcher(store)
    events = dispatcher.subscribe()
    try:
        with Restorer(proxy) as restorer:
            submitted = dispatcher.submit(plan, requested_by="tester")
            batch = submitted.batch.id
            ended = None
            while ended is None:
                event = events.get(timeout=120)
                assert event is not None, "the batch went quiet"
                if event["type"] == "approach.phase" and event.get("approach") == "second" \
                        and event.get("phase") == "ready" and not restorer.armed.is_set():
                    if outage == "hang":
                        proxy.hang()
                    else:
                        proxy.cut()
                    restorer.arm()
                if event["type"] in ("batch.finished", "batch.cancelled"):
                    ended = event
            assert restorer.noticed.is_set(), "the batch's store never met the outage"
            assert restorer.restored.is_set(), "the batch ended before the database came back"
    finally:
        events.close()
        dispatcher.close()
    assert ended["state"] == "done" and ended.get("report") is not None, ended
    direct = Store(direct_url)
    try:
        row = direct.get_batch(batch)
        assert row is not None and row.state == "done"
        assert [(r.approach, r.status) for r in direct.records(batch)] == [
            ("baseline", "ok"), ("second", "ok"), ("third", "ok")]
    finally:
        direct.close()
    standin.assert_clean()
