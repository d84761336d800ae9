"""`retry`: the named approaches run again with the baseline and the parents they extend, so
that the question each was to settle (`vs_parent`) can be judged again (issue 14, item 2)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot import views
from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.commands import retry, run
from jobs.commands.context import Caller, Context
from jobs.core.plans import BatchPlan
from jobs.errors import UserError
from jobs.store import TERMINAL_STATES, BatchRow, Store
from tests.bot.conftest import FakeEngine

FAMILY = """\
name: family
description: Approaches that extend one another, and a sweep on top of one of them
engine: local
metric: output_throughput
min_effect_pct: 2.0
reps: 1
timeouts: {startup_s: 10, bench_s: 10}
bench: {num-prompts: 1}
baseline:
  server_args: {model-path: /models/tiny}
  env: {FAKE_VALUE: "100"}
approaches:
  - name: parent
    hypothesis: The first step
    env: {FAKE_VALUE: "110"}
  - name: child
    extends: parent
    hypothesis: A second step on top of the first
    env: {FAKE_SPREAD: "1"}
  - name: grandchild
    extends: child
    hypothesis: A third step on top of the second
    env: {FAKE_DELAY: "0.01"}
  - name: alone
    hypothesis: Unrelated
    env: {FAKE_VALUE: "90"}
sweep:
  name: tune
  extends: child
  grid:
    FAKE_VALUE: [111, 112]
  search: grid
"""


@pytest.fixture
def dispatcher(config_copy: Path) -> Iterator[EmbeddedDispatcher]:
    (config_copy / "presets" / "family.yaml").write_text(FAMILY)
    d = EmbeddedDispatcher(Store(), engine_factory=lambda name: FakeEngine())
    yield d
    d.close()


@pytest.fixture
def ctx(dispatcher: EmbeddedDispatcher) -> Context:
    return Context(store=dispatcher.store, caller=Caller(user="U_ALICE", surface="cli"),
                   make_dispatcher=lambda: dispatcher, engine_for=lambda name: FakeEngine())


def finished(store: Store, batch_id: str) -> BatchRow:
    deadline = time.monotonic() + 60
    while (row := store.get_batch(batch_id)) is None or row.state not in TERMINAL_STATES:
        assert time.monotonic() < deadline, f"batch {batch_id} did not end"
        time.sleep(0.02)
    return row


@pytest.fixture
def first(ctx: Context) -> BatchRow:
    started = run.run(ctx, run.RunArgs(preset="family"))
    return finished(ctx.store, started.submitted.batch.id)


def names(plan: BatchPlan) -> list[str]:
    return [c.approach for c in plan.configs]


def test_retry_of_a_child_runs_its_parent_and_the_baseline(ctx: Context, first: BatchRow) -> None:
    started = retry.retry(ctx, retry.RetryArgs(batch=first.id, approaches=["child"]))
    assert names(started.plan) == ["baseline", "parent", "child"]
    row = finished(ctx.store, started.submitted.batch.id)
    assert row.state == "done" and row.report is not None
    results = {r["approach"]: r for r in row.report["results"]}
    # the parent ran beside it, so the question it was to settle is judged again
    assert results["child"]["vs_parent"] is not None
    assert results["child"]["vs_parent"]["approach"] == "parent"


def test_parents_are_added_transitively_once_in_preset_order(
    ctx: Context, first: BatchRow
) -> None:
    started = retry.retry(ctx, retry.RetryArgs(batch=first.id,
                                               approaches=["grandchild", "alone", "child"]))
    assert names(started.plan) == ["baseline", "parent", "child", "grandchild", "alone"]
    # The reply says which parents came along and why.
    assert started.added == ("parent",)
    assert views.started(started).endswith(
        "; with parent, which the retried approaches extend, so each is judged against its "
        "parent again")


def test_a_sweep_point_brings_the_sweeps_extends_approach(ctx: Context, first: BatchRow) -> None:
    point = "tune@FAKE_VALUE=111"
    assert point in [c.approach for c in first.plan.points]
    started = retry.retry(ctx, retry.RetryArgs(batch=first.id, approaches=[point]))
    assert names(started.plan) == ["baseline", "parent", "child", point]
    assert started.plan.config(point).parent == "child"


def test_an_approach_without_a_parent_runs_alone_with_the_baseline(
    ctx: Context, first: BatchRow
) -> None:
    started = retry.retry(ctx, retry.RetryArgs(batch=first.id, approaches=["alone"]))
    assert names(started.plan) == ["baseline", "alone"]
    assert started.added == () and "extend" not in views.started(started)


def test_an_unknown_approach_stores_nothing(ctx: Context, first: BatchRow) -> None:
    before = [r.id for r in ctx.store.list_batches()]
    with pytest.raises(UserError, match="has no approach 'chld'"):
        retry.retry(ctx, retry.RetryArgs(batch=first.id, approaches=["chld"]))
    assert [r.id for r in ctx.store.list_batches()] == before


def test_with_parents_stops_at_a_loop_and_at_the_baseline(first: BatchRow) -> None:
    assert retry.with_parents(first.plan, ["grandchild"]) == ["parent", "child", "grandchild"]
    assert retry.with_parents(first.plan, ["baseline"]) == []
