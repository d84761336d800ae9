"""A worker killed mid-sweep: a real `specbench worker` running an adaptive sweep on the SGLang
stand-in is killed with SIGKILL; its successor finishes the sweep and the confirmation, and no
point that had finished runs again. Skipped without Redis unless SPECBENCH_REQUIRE_REDIS=1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.batches.planning import plan_batch
from jobs.store import Store
from tests.builders import killed_worker, needs, standin_preset
from tests.jobs.test_distributed import (
    TAG,
    Site,
    leftovers,
    make_site,
    redis_db,
    wait_until,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow, needs("optuna")]

PRESET = standin_preset(
    "standin-sweep", description="an adaptive sweep over the stand-in's throughput",
    queue="sweepq", warmup=False, overridable=None,
    env={"STANDIN_STARTUP_S": "0.3", "STANDIN_TAG": TAG, "STANDIN_THROUGHPUT": "80"},
    sweep={"name": "tp", "grid": {"STANDIN_THROUGHPUT": [60, 70, 85, 95, 110, 100]},
           "search": "adaptive", "budget": 4, "confirm_reps": 1},
)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    gen = redis_db()
    site = make_site(tmp_path, next(gen), {"standin-sweep": PRESET})
    # The successor's Gaussian-process proposal: one torch thread on the suite's loaded cores.
    site.env["OMP_NUM_THREADS"] = "1"
    for name, value in site.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SPECBENCH_BROKER_URL", site.broker)
    yield site
    next(gen, None)


@pytest.mark.timeout(240)
def test_a_worker_killed_mid_sweep_is_resumed_and_no_point_runs_twice(site: Site) -> None:
    store = Store(site.database)
    with killed_worker(site, "sweepq") as run:
        batch = run.submit(plan_batch("standin-sweep"))
        # Killed once two points are stored, while the third runs.
        wait_until(lambda: len(store.records(batch)) >= 3, timeout=120,
                   what="the baseline and two points", alive=run.worker.proc)
        before = {r.approach: r.started_at for r in store.records(batch)}
        run.worker.kill9()
        events = run.resume(timeout=150)
    assert events[-1]["type"] == "batch.finished"
    records = store.records(batch)
    points = [r.approach for r in records if r.approach.startswith("tp@")]
    assert len(points) == len(set(points)) == 4, points  # the budget, none twice
    for record in records:  # what had finished before the kill was not run again
        if record.approach in before:
            assert record.started_at == before[record.approach]
    row = store.get_batch(batch)
    assert row is not None and row.state == "done" and row.report is not None
    sweep = row.report["sweep"]
    assert sweep["measured"] == 4 and sweep["confirmation"] is not None
    confirm = store.get_batch(sweep["confirmation"]["batch"])
    assert confirm is not None and confirm.state == "done" and confirm.plan.confirms == batch
    assert [r.approach for r in store.records(confirm.id)] == [
        "baseline", sweep["confirmation"]["approach"]]
    assert leftovers() == []
