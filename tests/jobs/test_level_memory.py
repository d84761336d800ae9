"""Memory across batches with load levels (issue 23): a run that measured a level before it
failed at a higher one is no dead end, whatever its cause — it works up to a load, and its
verdict (improved, regressed or mixed, level by level) says where it stops; a run that failed
before any level still is. The real store, execution, rules and verdicts, on SQLite and
PostgreSQL, with an engine that fails the way a GPU does; the same batch's events through the
command line's progress line and the thread's progress message name each level."""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Iterator
from typing import Any

import pytest

from bot.cli.progress import ProgressBar
from bot.thread.progress_message import ProgressMessage
from jobs.batches.execution import execute_batch
from jobs.core.digest import memory_of, reopened_dead_ends
from jobs.core.events import CallbackSink, Event, NullSink
from jobs.core.memory import reached_a_level
from jobs.core.plans import BatchPlan, RunConfig, parse_preset, resolve
from jobs.core.records import RunRecord
from jobs.core.rules import load_rules
from jobs.engines.base import RunContext, now_iso, to_run_record
from jobs.store import Store
from tests.conftest import make_record
from tests.jobs.test_dead_ends import ARCH, STACK
from tests.jobs.test_digest import NOW, row
from tests.jobs.test_store import postgres_url, url  # noqa: F401 - fixtures: both databases

PRESET = """\
name: levels
description: one approach that fails above its first level, one that fails at once
engine: sglang
reps: 2
loads:
  max-concurrency: [1, 4]
baseline:
  server_args: {model-path: /m, tp-size: 8}
approaches:
  - name: partial
    hypothesis: fast at low load
    server_args: {enable-torch-symm-mem: true}
  - name: broken
    hypothesis: never starts
    server_args: {max-running-requests: 4096}
"""


def level(n: int, samples: list[float], status: str = "ok") -> dict[str, Any]:
    return {"load": {"max-concurrency": n}, "status": status,
            "metrics": {"output_throughput": samples}}


class GPU:
    """`partial` measures max-concurrency 1 and then hits a kernel this GPU lacks at 4 (the
    same log line as a run that cannot start at all); `broken` fails before any level."""

    name = "sglang"

    def __init__(self) -> None:
        self.started: list[str] = []

    def preflight(self, plan: BatchPlan) -> dict[str, str]:
        return {}

    def fingerprint(self) -> dict[str, Any]:
        return dict(STACK)

    def run(self, config: RunConfig, ctx: RunContext) -> RunRecord:
        self.started.append(config.approach)
        if config.approach == "broken":
            return to_run_record(config, ctx, status="failed", started_at=now_iso(),
                                 exit_code=1, log_tail=ARCH, extra={"by_load": [
                                     level(1, [], "failed"), level(4, [], "skipped")]})
        if config.approach == "partial":
            return to_run_record(
                config, ctx, status="failed", started_at=now_iso(), exit_code=1,
                log_tail=ARCH, metrics={"output_throughput": [130.0, 131.0]},
                extra={"by_load": [level(1, [130.0, 131.0]), level(4, [], "failed")]})
        return to_run_record(
            config, ctx, status="ok", started_at=now_iso(), exit_code=0,
            metrics={"output_throughput": [100.0, 101.0]},
            extra={"by_load": [level(1, [100.0, 101.0]), level(4, [200.0, 201.0])]})


@pytest.fixture
def db(url: str) -> Iterator[Store]:  # noqa: F811 - the imported fixture, requested
    with Store(url) as opened:
        yield opened


def batch(store: Store, engine: GPU, name: str) -> dict[str, Any]:
    store.migrate()
    plan = resolve(parse_preset(PRESET, source="levels.yaml", stem="levels"))
    store.create_batch(batch_id=name, preset="levels", engine="sglang", queue="default",
                       requested_by="U1", plan=plan)
    return execute_batch(name, store=store, sink=NullSink(), engine=engine)


def test_a_run_that_measured_a_level_is_tried_again_one_that_measured_none_is_not(
    db: Store,
) -> None:
    first = GPU()
    report = batch(db, first, "b-first")
    results = {r["approach"]: r for r in report["results"]}
    assert [e["verdict"] for e in results["partial"]["by_load"]] == ["improved", "failed"]
    assert results["broken"]["verdict"] == "failed"
    second = GPU()
    again = batch(db, second, "b-second")
    # the same stack, the same arch-unsupported line: only the one that measured nothing is
    # a known dead end
    assert second.started == ["baseline", "partial", "baseline"]  # the baseline again, last
    results = {r["approach"]: r for r in again["results"]}
    assert results["broken"]["why"].startswith("known from b-first: ")
    assert not results["partial"]["why"].startswith("known from")


def test_reached_a_level_needs_a_measured_level() -> None:
    def run(*levels: dict[str, Any]) -> RunRecord:
        return make_record("x", status="failed", extra={"by_load": list(levels)})

    assert reached_a_level(run(level(1, [130.0]), level(4, [], "failed")))
    assert not reached_a_level(run(level(1, [], "failed"), level(4, [], "skipped")))
    assert not reached_a_level(run(level(1, [], "ok")))  # ok, but nothing measured
    assert reached_a_level(run({"load": {"max-concurrency": 1},
                                "metrics": {"output_throughput": [1.0]}}))  # ok by default
    assert not reached_a_level(make_record("plain", status="failed"))  # no levels at all


def test_an_upgrade_reopens_only_the_runs_that_measured_no_level() -> None:
    def failed(name: str, levels: list[dict[str, Any]]) -> RunRecord:
        return make_record(name, status="failed", samples=[], log_tail=ARCH, batch="b-old",
                           fingerprint=dict(STACK), extra={"by_load": levels})

    old = [failed("partial", [level(1, [130.0, 131.0]), level(4, [], "failed")]),
           failed("broken", [level(1, [], "failed"), level(4, [], "skipped")])]
    new = [make_record("baseline", batch="b-new",
                       fingerprint={**STACK, "driver": "580.65.06"})]
    rows = [row("b-old", days_ago=20, results=[]), row("b-new", days_ago=1, results=[])]
    records = {"b-old": old, "b-new": new}
    since = NOW - dt.timedelta(days=7)
    memory = memory_of(rows, records, since=since, now=NOW)
    assert [r.approach for _, r in memory.dead_ends] == ["broken"]
    every = [(rows[0].created_at, r) for r in old]  # as the store would serve them
    reopened = reopened_dead_ends([rows[1]], records, dead_ends=every, rules=load_rules())
    assert [r["approach"] for r in reopened] == ["broken"]


class Levels(GPU):
    """Emits DESIGN23's phases: a `level` phase before each level, later phases tagged."""

    def run(self, config: RunConfig, ctx: RunContext) -> RunRecord:
        if config.approach == "baseline":
            for index, n in enumerate((1, 4), start=1):
                tag = {"load": {"max-concurrency": n}}
                ctx.on_phase("level", {**tag, "level": index, "levels": 2})
                ctx.on_phase("warmup", {**tag, "of": 2})
                ctx.on_phase("repetition", {**tag, "rep": 1, "of": 2})
        return super().run(config, ctx)


def test_the_progress_line_and_the_thread_name_the_level_from_a_real_batch(db: Store) -> None:
    events: list[Event] = []
    db.migrate()
    plan = resolve(parse_preset(PRESET, source="levels.yaml", stem="levels"))
    db.create_batch(batch_id="b-p", preset="levels", engine="sglang", queue="default",
                    requested_by="U1", plan=plan)
    execute_batch("b-p", store=db, sink=CallbackSink(events.append), engine=Levels())
    stream = io.StringIO()
    bar = ProgressBar(stream)
    chat = ProgressMessage.of("b-p", ["baseline", "partial", "broken"])
    for event in events:
        bar.on_event(event)
        chat.apply(event)
    lines = [line.split("] ", 1)[1] for line in stream.getvalue().splitlines()]
    assert "1/4 baseline: level 1/2 max-concurrency 1" in lines
    assert "1/4 baseline: level 2/2 max-concurrency 4 · rep 1/2" in lines
    finished = next(line for line in lines if line.startswith("1/4 baseline: ok"))
    assert finished.endswith("at c=1 · c=1 100.5 · c=4 200.5")
    assert next(line for line in lines if line.startswith("2/4 partial: improved")).endswith(
        "· c=1 ▲ +29.9% · c=4 ✗")
    assert "▲ partial: improved 130.5 tok/s (+29.9%) at c=1" in chat.render().text
