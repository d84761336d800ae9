"""`status` says when a batch ends from the same preset's past configurations: honest for a
full batch after short ones, overdue when it is late, unknown without history."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pytest

from jobs import settings
from jobs.batches.dispatch import queue_entries
from jobs.commands.context import Caller, Context
from jobs.commands.status import status
from jobs.core.estimates import PastRun, configuration_s, estimate, to_past_run
from jobs.core.messages import render_text
from jobs.core.plans import BatchPlan
from jobs.store import Store
from tests.conftest import make_plan, make_record

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)
STEP_S = 10.0  # each past configuration: a start and 4 passes (a warm-up and 3 repetitions)


def plan_of(n: int, **fields: object) -> BatchPlan:
    base = make_plan()
    configs = tuple(dataclasses.replace(base.configs[1], approach=f"a{i}") for i in range(1, n))
    return dataclasses.replace(base, configs=(base.baseline, *configs), **fields)


def stamp(at: dt.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def store_batch(store: Store, batch_id: str, plan: BatchPlan, *, state: str, runs: int,
                began: dt.datetime, seconds: float = STEP_S) -> None:
    """A batch of `plan` with its first `runs` configurations recorded, `seconds` each."""
    store.create_batch(batch_id=batch_id, preset=plan.preset, engine=plan.engine,
                       queue=plan.queue, requested_by="U1", plan=plan)
    store.set_state(batch_id, "running")
    for index, config in enumerate(plan.configs[:runs]):
        start = began + dt.timedelta(seconds=index * seconds)
        record = make_record(config.approach, batch=batch_id, preset=plan.preset,
                             role=config.role, samples=[100.0] * plan.reps,
                             extra={"warmup": {"output_throughput": 50.0}} if plan.warmup else {})
        record = dataclasses.replace(record, started_at=stamp(start),
                                     finished_at=stamp(start + dt.timedelta(seconds=seconds)))
        store.put_record(record, position=index)
    if state != "running":
        store.set_state(batch_id, state)


@pytest.fixture(autouse=True)
def _now() -> None:
    """NOW is the test's own start: the store stamps a batch's start with the real clock, so a
    NOW taken when the module was collected (minutes earlier in a full run) would put the
    running configuration's start after the patched clock."""
    global NOW
    NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'db.sqlite'}")


def at(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    monkeypatch.setattr(settings, "utcnow", lambda: NOW + dt.timedelta(seconds=seconds))


def test_a_full_batch_after_short_ones_is_estimated_per_configuration(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's '~7 s with 23 s left': whole-batch medians gave a six-configuration batch
    the duration of the two-configuration retries and confirmations beside it."""
    earlier = NOW - dt.timedelta(hours=1)
    store_batch(store, "b-full", plan_of(6), state="done", runs=6, began=earlier)
    for n in range(3):
        store_batch(store, f"b-retry{n}", plan_of(2), state="done", runs=2, began=earlier)
    store_batch(store, "b-now", plan_of(6), state="running", runs=2, began=NOW)
    at(monkeypatch, 2 * STEP_S + 3)  # two configurations ended, the third has run 3 s
    [entry] = queue_entries(store, store.list_batches(states=("running",)))["default"]
    assert entry.eta_s == pytest.approx(4 * STEP_S - 3, abs=0.5)  # 37 s, not ~7 or 0
    assert entry.overdue_s is None
    text = render_text("status", queues=status(context(store))["queues"])
    assert "b-now  eagle3  by U1" in text and "ends in ~37 s" in text


def test_a_late_last_configuration_is_overdue_not_a_small_number(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_batch(store, "b-old", plan_of(2), state="done", runs=2, began=NOW)
    store_batch(store, "b-now", plan_of(2), state="running", runs=1, began=NOW)
    store_batch(store, "b-next", plan_of(2), state="queued", runs=0, began=NOW)
    at(monkeypatch, STEP_S + STEP_S + 25)  # the last configuration: 35 s against 10
    running, queued = queue_entries(store, store.list_batches(states=("queued", "running")))[
        "default"]
    assert running.eta_s == 0 and running.overdue_s == pytest.approx(25, abs=0.5)
    assert queued.eta_s == pytest.approx(2 * STEP_S, abs=0.5) and queued.overdue_s is not None
    text = render_text("status", queues=status(context(store))["queues"])
    assert "overdue by ~25 s" in text
    assert "ends in ~20 s or later (the batch ahead is ~25 s past its estimate)" in text


def test_without_history_the_estimate_is_unknown(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_batch(store, "b-now", plan_of(3), state="running", runs=1, began=NOW)
    at(monkeypatch, 30)
    [entry] = queue_entries(store, store.list_batches(states=("running",)))["default"]
    assert entry.eta_s is None and entry.overdue_s is None
    text = render_text("status", queues=status(context(store))["queues"])
    assert "ends in: unknown (no past run of eagle3 to estimate from)" in text


def test_more_passes_scale_by_the_time_per_pass_and_the_warm_up_counts() -> None:
    history = [PastRun(seconds=STEP_S, passes=4)]
    assert configuration_s(history, passes=4) == STEP_S
    assert configuration_s(history, passes=6) == pytest.approx(15.0)  # --reps 5 + warm-up
    without = estimate(plan_of(2, warmup=False), history)
    with_warmup = estimate(plan_of(2), history)
    assert without is not None and with_warmup is not None
    assert without.left_s == pytest.approx(2 * 7.5) and with_warmup.left_s == 2 * STEP_S
    assert configuration_s([], passes=4) is None


def test_a_past_run_counts_its_warm_up_and_skips_failures() -> None:
    record = dataclasses.replace(
        make_record("a", samples=[1.0, 2.0, 3.0], extra={"warmup": {"output_throughput": 1.0}}),
        started_at="2026-12-03T10:00:00Z", finished_at="2026-12-03T10:00:12Z")
    assert to_past_run(record) == PastRun(seconds=12.0, passes=4)
    assert to_past_run(dataclasses.replace(record, status="failed")) is None
    assert to_past_run(dataclasses.replace(record, finished_at=None)) is None


def context(store: Store) -> Context:
    return Context(store=store, caller=Caller("U1", surface="cli"))
