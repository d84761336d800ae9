"""A whole stand-in batch through `execute_batch`: verdicts, causes, the store, no leftovers."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from jobs.batches.execution import build_report, execute_batch
from jobs.batches.planning import submit
from jobs.core.events import CallbackSink, Event, LocalChannel
from jobs.engines.sglang.engine import SGLangEngine
from jobs.store import Store
from tests.standin.harness import Standin, make_standin


def declared(config):
    """The stand-in's knobs set by the test are the approach's declared change."""
    knobs = ("STANDIN_THROUGHPUT", "STANDIN_FATAL", "STANDIN_MODE")
    env = {k: v for k, v in config.env.items() if k in knobs}
    return dataclasses.replace(config, change={"server_args": {}, "env": env})


@pytest.fixture
def standin(tmp_path, monkeypatch) -> Standin:
    return make_standin(tmp_path, monkeypatch)


def _drain(inbox) -> list[Event]:
    events = []
    while not inbox.empty():
        events.append(inbox.get())
    return events


@pytest.mark.timeout(120)
def test_a_stand_in_batch_gets_the_right_verdicts_and_leaves_nothing(standin, tmp_path):
    plan = standin.plan(
        standin.config("baseline", role="baseline", env={"STANDIN_THROUGHPUT": "80"}),
        declared(standin.config("faster", env={"STANDIN_THROUGHPUT": "95"})),
        standin.config("crash", "crash"),
        declared(standin.config("fatal", "fatal-then-hang", env={"STANDIN_FATAL": "arch"})),
        standin.config("hang", "silent-hang"),
        standin.config("typo", server_args={"cuda-graph-max-bz": 8}),
        declared(standin.config("children", "children", env={"STANDIN_THROUGHPUT": "80.5"})),
        startup_s=4.0, reps=2,  # one repetition would be no noise estimate
    )
    store = Store(f"sqlite:///{tmp_path}/store.db")
    row, created = submit(plan, store=store, requested_by="tester")
    assert created
    channel = LocalChannel()
    inbox = channel.subscribe()

    report = execute_batch(row.id, store=store, sink=channel, engine=SGLangEngine())

    results = {r["approach"]: r for r in report["results"]}
    assert results["faster"]["verdict"] == "improved"
    assert (results["crash"]["verdict"], results["crash"]["cause"]) == ("failed", "crash")
    assert results["fatal"]["cause"] == "arch-unsupported"
    assert results["hang"]["cause"] == "timeout"
    assert results["typo"]["cause"] == "bad-config"
    assert "did you mean --cuda-graph-max-bs" in results["typo"]["why"]
    assert results["children"]["verdict"] == "unchanged"
    assert report["key_achievement"]["approach"] == "faster"
    standin.assert_clean()

    records = store.records(row.id)
    assert [r.approach for r in records] == [c.approach for c in plan.configs]
    assert store.get_batch(row.id).state == "done"
    assert build_report(records, plan)["results"] == report["results"]
    # the unknown flag never started a server
    assert all("cuda-graph-max-bz" not in " ".join(n.get("argv", [])) for n in standin.notes())

    events = _drain(inbox)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "batch.started" and kinds[-1] == "batch.finished"
    finished = [e["approach"] for e in events if e["type"] == "approach.finished"]
    assert finished == [c.approach for c in plan.configs]
    # each approach is judged once: its event says what the report says
    said = {e["approach"]: (e["verdict"], e["cause"], e["why"]) for e in events
            if e["type"] == "approach.finished" and e["approach"] != "baseline"}
    assert said == {name: (r["verdict"], r["cause"], r["why"]) for name, r in results.items()}
    phases = [e["phase"] for e in events
              if e["type"] == "approach.phase" and e["approach"] == "faster"]
    assert phases[:3] == ["preflight", "launching", "ready"] and "repetition" in phases


@pytest.mark.timeout(180)
def test_a_cancel_skips_the_rest_and_ends_the_batch_cancelled(standin, tmp_path):
    plan = standin.plan(
        standin.config("baseline", role="baseline"),
        standin.config("hang", "slow-bench"),
        standin.config("never", "ok"),
        bench_s=60.0,
    )
    store = Store(f"sqlite:///{tmp_path}/store.db")
    row, _ = submit(plan, store=store, requested_by="tester")
    benchmarking = threading.Event()

    def watch(event: Event) -> None:
        if event.get("approach") == "hang" and event.get("phase") in ("warmup", "repetition"):
            benchmarking.set()

    report = execute_batch(row.id, store=store, sink=CallbackSink(watch), engine=SGLangEngine(),
                           should_stop=benchmarking.is_set)
    verdicts = {r["approach"]: r["verdict"] for r in report["results"]}
    assert verdicts == {"hang": "cancelled", "never": "skipped"}
    assert report["state"] == "cancelled"
    assert store.get_batch(row.id).state == "cancelled"
    standin.assert_clean()


def test_a_batch_cancelled_after_its_runner_read_it_queued_never_runs(standin, tmp_path):
    """A runner that read the row while it was queued, then was beaten by a cancel: it takes
    the batch only from queued (or running, resumed), so the cancelled batch is not brought back
    to running, no server starts and no batch.started follows the cancel."""
    plan = standin.plan(standin.config("baseline", role="baseline"),
                        standin.config("faster", "ok"))
    store = Store(f"sqlite:///{tmp_path}/store.db")
    row, _ = submit(plan, store=store, requested_by="tester")
    store.request_cancel(row.id)
    assert store.set_state(row.id, "cancelled", only_from=["queued"])  # request_cancel's step
    seen: list[Event] = []

    report = execute_batch(row.id, store=store, sink=CallbackSink(seen.append),
                           engine=SGLangEngine())

    assert report == {} and seen == []
    assert store.get_batch(row.id).state == "cancelled" and store.records(row.id) == []
    assert standin.notes("server") == []
    assert not store.start(row.id, host="h")  # as the runner found it
    other, _ = submit(plan, store=store, requested_by="tester")
    assert store.start(other.id, host="h") and store.start(other.id, host="h")  # resumed too


@pytest.mark.timeout(180)
def test_a_resumed_batch_does_not_run_finished_approaches_again(standin, tmp_path):
    plan = standin.plan(
        standin.config("baseline", role="baseline"),
        standin.config("a"),
        standin.config("b"),
    )
    store = Store(f"sqlite:///{tmp_path}/store.db")
    row, _ = submit(plan, store=store, requested_by="tester")
    execute_batch(row.id, store=store, sink=LocalChannel(), engine=SGLangEngine())
    first = {r.approach: r.started_at for r in store.records(row.id)}
    servers = len(standin.notes("server"))

    store.set_state(row.id, "running")  # as if the worker had died before the last write
    execute_batch(row.id, store=store, sink=LocalChannel(), engine=SGLangEngine())

    assert {r.approach: r.started_at for r in store.records(row.id)} == first
    assert len(standin.notes("server")) == servers
