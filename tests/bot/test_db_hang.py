"""A hung or refusing PostgreSQL neither freezes the bot nor fails the batch (issue 20, item 1).

Real processes: a `specbench bot --http` and a `specbench worker`, both on one PostgreSQL
database through a TCP proxy the test owns, a real Redis, the Slack stand-in. While a batch
runs, the proxy first hangs (it accepts and answers nothing, on new connections and open ones),
then refuses connections, each time until the worker has found its store away and enough
`help` commands were acked meanwhile; all along, signed `help` commands arrive at a steady rate.
The bot's own database timeouts outlast the hang, so an ack or an answer that waited on the
database could not come while it lasts: every one is acked and answered while the database is
away, not after, and the batch completes: every configuration measured, its summary posted once.

`run_outages` is also what `tests/bench/bench_db_hang.py` measures with a 30 s hang: how fast
an ack is (Slack retries a request it has no answer to after 3 s) is its figure.
Skipped without PostgreSQL or Redis (unless SPECBENCH_REQUIRE_POSTGRES / _REDIS say otherwise).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
from sqlalchemy.engine import make_url

from jobs.store import BatchRow, Store
from jobs.store.connections import GRACE_S
from tests.bot.conftest import sign, summaries
from tests.bot.test_distributed_bot import Bot
from tests.builders import loopback_client, standin_preset
from tests.jobs.test_distributed import Site, Worker, make_site, redis_db, wait_until
from tests.standin.postgres import fresh_database
from tests.standin.slack_api import SlackStandin
from tests.standin.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

TIMEOUTS = {"SPECBENCH_DB_CONNECT_TIMEOUT_S": "2", "SPECBENCH_DB_STATEMENT_TIMEOUT_S": "3"}
# the bot's in the test: a call of its own on the hung database waits until the hang is over
OUTLASTING = {"SPECBENCH_DB_CONNECT_TIMEOUT_S": "600", "SPECBENCH_DB_STATEMENT_TIMEOUT_S": "600"}
APPROACHES = 3  # the hang is met by step-1, the refusal by a later step: one to spare
HELPS = 15  # sent while each outage lasts, at least
# the hang outlasts the longest a call may stay hung: the statement timeout, then the watchdog
HANG_S = float(TIMEOUTS["SPECBENCH_DB_STATEMENT_TIMEOUT_S"]) + GRACE_S
UNREACHABLE = "the store is unreachable"  # jobs.store.outage: a call met an outage
ANSWERED = "the store answered again"  # ... and the store answered once it was over
PRESET = standin_preset(
    "standin-hang",
    description="a stand-in batch that runs while its database hangs, then refuses",
    queue="hangq", env={"STANDIN_STARTUP_S": "0.2"},
    approaches=[{"name": f"step-{i}", "hypothesis": "ends while the database may be away",
                 "env": {"STANDIN_THROUGHPUT": f"{90 + i}", "STANDIN_STARTUP_S": "3"}}
                for i in range(1, APPROACHES + 1)],
)


@dataclass
class Ack:
    phase: str  # "before", "hang", "refused", "between", "after"
    sent_at: float
    latency_s: float
    status: int


@dataclass
class Pinger:
    """Signed `help` commands to the bot at a steady rate, each ack timed, on its own thread."""

    port: int
    rate_hz: float
    phase: str = "before"
    acks: list[Ack] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Pinger:
        self._thread = threading.Thread(target=self._run, name="pinger", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def sent(self, phase: str) -> int:
        """The helps sent during `phase` and acked (each is recorded once its ack came)."""
        return sum(a.phase == phase and a.status == 200 for a in self.acks)

    def _run(self) -> None:
        period = 1.0 / self.rate_hz
        with loopback_client(timeout=30) as client:
            next_at = time.monotonic()
            while not self._stop.is_set():
                self.acks.append(self._help(client))
                next_at += period
                self._stop.wait(max(next_at - time.monotonic(), 0.0))

    def _help(self, client: httpx.Client) -> Ack:
        body = urlencode({"team_id": "T0001", "channel_id": "C_LAB", "user_id": "U_ALICE",
                          "command": "/specbench", "text": "help",
                          "trigger_id": f"help-{time.time_ns()}"})
        phase, began = self.phase, time.monotonic()
        try:
            status = client.post(f"http://127.0.0.1:{self.port}/slack/events",
                                 content=body.encode(), headers=sign(body)).status_code
        except httpx.HTTPError:
            status = 0
        return Ack(phase, began, time.monotonic() - began, status)


@dataclass
class Outcome:
    acks: list[Ack]
    row: BatchRow
    records: list[tuple[str, str]]  # (approach, status)
    summaries: int
    help_answers: int
    worker_log: str
    bot_log: str
    away: dict[str, tuple[float, float]]  # each outage's (start, end), time.monotonic()
    answered_at: list[float]  # when each help's answer reached Slack, time.monotonic()

    def answered_during(self, kind: str) -> int:
        """Answers that reached Slack while the outage lasted."""
        start, end = self.away[kind]
        return sum(start <= at <= end for at in self.answered_at)

    def acked_during(self, kind: str) -> int:
        """Helps sent and acked while the outage lasted."""
        start, end = self.away[kind]
        return sum(a.status == 200 and start <= a.sent_at and a.sent_at + a.latency_s <= end
                   for a in self.acks)

    def latencies(self, *phases: str) -> list[float]:
        return [a.latency_s for a in self.acks if not phases or a.phase in phases]

    def p99(self, *phases: str) -> float:
        values = sorted(self.latencies(*phases))
        if len(values) < 2:
            return values[0] if values else float("nan")
        return statistics.quantiles(values, n=100, method="inclusive")[98]


def start_worker_and_bot(worker_site: Site, queue: str, bot_site: Site,
                         standin: SlackStandin) -> tuple[Worker, Bot]:
    """Both processes started at once, each waiting for its own readiness (each takes seconds
    to import and connect); if one fails to start, the other is stopped."""
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="start") as pool:
        worker = pool.submit(Worker, worker_site, queue)
        bot = pool.submit(Bot, bot_site, standin)
    failed = [error for f in (worker, bot) if (error := f.exception()) is not None]
    if failed:
        for started in (f.result() for f in (worker, bot) if f.exception() is None):
            started.stop()
        raise failed[0]
    return worker.result(), bot.result()


@contextmanager
def _database() -> Iterator[tuple[str, TcpProxy, str]]:
    """A fresh, migrated database, a proxy to it, and its URL through the proxy."""
    with fresh_database("specbench_hang") as created:
        url = make_url(created)
        Store(created).migrate()
        with TcpProxy(url.host or "127.0.0.1", url.port or 5432) as proxy:
            through = url.set(host="127.0.0.1", port=proxy.port)
            yield created, proxy, through.render_as_string(hide_password=False)


def run_outages(root: Path, outages: Sequence[tuple[str, float]], *, rate_hz: float = 2.0,
                gap_s: float = 3.0, timeouts: Mapping[str, str] = TIMEOUTS,
                bot_timeouts: Mapping[str, str] | None = None,
                until_met: bool = False) -> Outcome:
    """One batch through `outages` ("hang" or "refused", seconds each, `gap_s` apart), started
    once its baseline is stored, with `help` at `rate_hz` all along; then the batch's end.
    `timeouts`: the database settings of both processes (empty: the defaults), `bot_timeouts`
    the bot's over them. `until_met`: each outage also lasts until the worker has found its
    store away, HELPS were sent and half as many answered during it, and each gap until the
    worker's store has answered again (so that each outage is met afresh)."""
    with _database() as (direct_url, proxy, proxied_url):
        gen = redis_db()
        site = make_site(root, next(gen), {"standin-hang": PRESET})
        site.env.update(timeouts, SPECBENCH_DATABASE_URL=proxied_url)
        bot_site = replace(site, env={**site.env, **(bot_timeouts or {})})
        standin = SlackStandin().start()
        direct = Store(direct_url)
        worker: Worker | None = None
        bot: Bot | None = None
        pinger: Pinger | None = None
        away: dict[str, tuple[float, float]] = {}
        try:
            worker, bot = start_worker_and_bot(site, "hangq", bot_site, standin)
            assert bot.command("run standin-hang").status_code == 200
            [row] = wait_until(direct.list_batches, timeout=30, what="the batch stored")
            wait_until(lambda: direct.records(row.id), timeout=60, what="the baseline's record")
            pinger = Pinger(bot.port, rate_hz).start()
            time.sleep(1.0)
            for kind, seconds in outages:
                logged = worker.output().count(UNREACHABLE)
                pinger.phase = kind
                began = time.monotonic()
                if kind == "hang":
                    proxy.hang()
                else:
                    proxy.cut()
                time.sleep(seconds)
                if until_met:
                    # ... and until half as many helps were answered in Slack while it lasts:
                    # an answer that waited on the database would never come before the restore
                    _wait_logged(worker, UNREACHABLE, after=logged, what=f"meet the {kind}",
                                 also=lambda phase=kind, since=began: pinger.sent(phase) >= HELPS
                                 and _answered_since(standin, since) >= HELPS // 2)
                proxy.restore()
                away[kind] = (began, time.monotonic())
                logged = worker.output().count(ANSWERED)
                pinger.phase = "between"
                time.sleep(gap_s)
                if until_met:
                    _wait_logged(worker, ANSWERED, after=logged, what=f"get over the {kind}")
            pinger.phase = "after"
            wait_until(lambda: (r := direct.get_batch(row.id)) is not None
                       and r.state in ("done", "failed", "cancelled"), timeout=180,
                       what="the batch to end")
            standin.wait_for(lambda cs: bool(summaries(cs)), timeout=60)
            pinger.stop()
            sent = len(pinger.acks)
            answered = lambda cs: [c for c in cs if c.method == "chat.postEphemeral"]  # noqa: E731
            standin.wait_for(lambda cs: len(answered(cs)) >= sent, timeout=60)
            time.sleep(1.0)  # room for a second summary, were there one
            final = direct.get_batch(row.id)
            assert final is not None
            return Outcome(
                acks=list(pinger.acks), row=final,
                records=[(r.approach, r.status) for r in direct.records(row.id)],
                summaries=len(summaries(standin.recorded())),
                help_answers=len(answered(standin.recorded())), worker_log=worker.output(),
                bot_log=bot.output(), away=away,
                answered_at=[c.at for c in answered(standin.recorded())])
        finally:
            if pinger is not None:
                pinger.stop()
            if bot is not None:
                bot.stop()
            if worker is not None:
                worker.stop()
            standin.stop()
            direct.close()
            next(gen, None)


def _answered_since(standin: SlackStandin, since: float) -> int:
    """The helps answered in Slack since `since` (time.monotonic)."""
    return sum(c.method == "chat.postEphemeral" and c.at >= since for c in standin.recorded())


def _wait_logged(worker: Worker, line: str, *, after: int, what: str,
                 also: Callable[[], bool] = lambda: True) -> None:
    """Until the worker's log holds `line` more than `after` times, and `also()`."""
    wait_until(lambda: worker.output().count(line) > after and also(), timeout=120,
               what=f"the worker to {what}")


@pytest.mark.timeout(420)
def test_acks_stay_fast_and_the_batch_completes_while_the_database_hangs_then_refuses(
    tmp_path: Path,
) -> None:
    outcome = run_outages(tmp_path, [("hang", HANG_S), ("refused", 0.0)], rate_hz=4.0, gap_s=0.0,
                          bot_timeouts=OUTLASTING, until_met=True)
    slowest = max(outcome.latencies())
    print(f"acks: {len(outcome.acks)}, slowest {slowest:.3f} s, p99 {outcome.p99():.3f} s")
    for phase in ("hang", "refused"):  # an ack that waited on the database came after it
        assert outcome.acked_during(phase) >= HELPS, f"too few helps acked while {phase}"
    assert all(a.status == 200 for a in outcome.acks), [a for a in outcome.acks if a.status != 200]
    assert outcome.help_answers >= len(outcome.acks), "every help is answered"
    for phase in ("hang", "refused"):  # and answered while the database is away, not after
        assert outcome.answered_during(phase) >= HELPS // 2, phase
    assert outcome.row.state == "done", (outcome.row.state, outcome.row.error)
    assert outcome.row.report is not None
    assert outcome.records == [("baseline", "ok")] + [
        (f"step-{i}", "ok") for i in range(1, APPROACHES + 1)]
    assert outcome.summaries == 1
    # both processes met the outage and waited it out, neither gave up
    assert "the store is unreachable" in outcome.worker_log
    assert "giving up" not in outcome.worker_log
