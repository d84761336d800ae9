"""A database blip on the worker (issue 10, item 3, the worker's half): PostgreSQL made unreachable
through a TCP proxy the test owns, at the moment a batch ends or fails, until the worker's store
has found it away and tried again (`Restorer`). The store waits it out (`PatientStore`) and the
batch ends recorded once the database is back, instead of `run_leased` raising inside its own
error handler and the batch waiting for its lease.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from jobs.batches.planning import submit
from jobs.broker.tasks import run_leased
from jobs.broker.worker import PatientStore, Runtime
from jobs.core.events import Event
from jobs.store import Store
from tests.jobs.test_store_timeouts import Restorer
from tests.standin.harness import Standin, make_standin
from tests.standin.postgres import PG_ADMIN_URL, fresh_database
from tests.standin.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    """A fresh PostgreSQL database of this module's own, dropped at its end (its name)."""
    with fresh_database("specbench_blip") as url:
        yield str(make_url(url).database)


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    parsed = make_url(PG_ADMIN_URL)
    with TcpProxy(parsed.host or "127.0.0.1", parsed.port or 5432) as owned:
        yield owned


@dataclass
class Outage:
    """Cuts the proxy when `trigger` matches an event; `restorer` brings it back."""

    restorer: Restorer
    trigger: Any
    fail_with: Exception | None = None
    events: list[Event] = field(default_factory=list)
    cut_at: float | None = None

    def emit(self, event: Event) -> None:
        self.events.append(event)
        if self.cut_at is None and self.trigger(event):
            self.cut_at = time.monotonic()
            self.restorer.proxy.cut()
            self.restorer.arm()
            if self.fail_with is not None:
                raise self.fail_with


@dataclass
class BlipRuntime(Runtime):
    outage: Outage | None = None

    @property
    def sink(self) -> Outage:  # type: ignore[override]
        assert self.outage is not None
        return self.outage


@pytest.fixture
def standin(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Standin:
    return make_standin(tmp_path, monkeypatch)


def _setup(standin: Standin, database: str, proxy: TcpProxy,
           outage: Outage) -> tuple[BlipRuntime, str, Store]:
    url = make_url(PG_ADMIN_URL).set(port=proxy.port, database=database)
    store = PatientStore(url.render_as_string(hide_password=False))
    store.migrate()
    plan = standin.plan(standin.config("baseline", role="baseline"),
                        standin.config("second", env={"STANDIN_THROUGHPUT": "90"}))
    row, _ = submit(plan, store=store, requested_by="tester")
    rt = BlipRuntime(queue="blip", url="redis://unused", store=store, client=None,  # type: ignore[arg-type]
                     ttl=30.0, outage=outage)
    direct = Store(make_url(PG_ADMIN_URL).set(database=database)
                   .render_as_string(hide_password=False))
    return rt, row.id, direct


def _is(kind: str, **fields: Any) -> Any:
    return lambda e: e["type"] == kind and all(e.get(k) == v for k, v in fields.items())


@pytest.mark.timeout(120)
def test_a_batch_that_ends_while_the_database_is_away_ends_recorded(
    standin: Standin, database: str, proxy: TcpProxy
) -> None:
    with Restorer(proxy) as restorer:
        outage = Outage(restorer, _is("approach.phase", index=2, phase="stopping"))
        rt, batch, direct = _setup(standin, database, proxy, outage)
        result = run_leased(rt, batch)
        ended = time.monotonic()
        assert outage.cut_at is not None and restorer.restored.is_set()
    assert result == "ran"
    assert restorer.noticed.is_set(), "the worker's store never met the outage"
    assert restorer.restoring_at is not None and ended > restorer.restoring_at, \
        "the database was away: it must have waited"
    row = direct.get_batch(batch)
    assert row is not None and row.state == "done" and row.report is not None
    assert (row.lease_owner, row.lease_expires_at) == (None, None)
    assert [(r.approach, r.status) for r in direct.records(batch)] == [
        ("baseline", "ok"), ("second", "ok")]
    assert outage.events[-1]["type"] == "batch.finished"
    standin.assert_clean()


@pytest.mark.timeout(120)
def test_a_batch_that_fails_while_the_database_is_away_ends_recorded_failed(
    standin: Standin, database: str, proxy: TcpProxy
) -> None:
    with Restorer(proxy) as restorer:
        outage = Outage(restorer, _is("approach.phase", index=2, phase="ready"),
                        fail_with=RuntimeError("the sink broke"))
        rt, batch, direct = _setup(standin, database, proxy, outage)
        result = run_leased(rt, batch)
        ended = time.monotonic()
        assert restorer.restored.is_set()
    assert result == "failed"
    assert restorer.noticed.is_set(), "the worker's store never met the outage"
    assert restorer.restoring_at is not None and ended > restorer.restoring_at
    row = direct.get_batch(batch)
    assert row is not None and row.state == "failed" and row.error == "the sink broke"
    assert (row.lease_owner, row.lease_expires_at) == (None, None)
    assert outage.events[-1]["type"] == "batch.finished"
    assert outage.events[-1]["state"] == "failed"
    standin.assert_clean()
