"""A batch with load levels resumes at the level it reached (docs/contracts.md "Load levels and
service-level objectives"): a `specbench worker` killed (kill -9) during level 2 of a
configuration, restarted, finishes the batch without benchmarking level 1 again.
Real Redis and real workers, as tests/jobs/test_distributed.py; skipped without Redis."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.batches.planning import plan_batch
from jobs.store import Store
from tests.builders import killed_worker, standin_preset
from tests.jobs.test_distributed import (
    TAG,
    Site,
    leftovers,
    make_site,
    redis_db,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]

PRESET = standin_preset(
    "standin-levels", description="a stand-in batch with load levels", queue="default",
    bench={"num-prompts": 16, "max-concurrency": None},
    loads={"max-concurrency": [1, 4, 16]}, slo={"p99_ttft_ms": 5000}, allow_few_samples=True,
    env={"STANDIN_STARTUP_S": "0.2", "STANDIN_TAG": TAG},
    approaches=[{"name": "second", "hypothesis": "the configuration a test interrupts",
                 "env": {"STANDIN_THROUGHPUT": "90"}}],
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    gen = redis_db()
    yield make_site(tmp_path_factory.mktemp("levels"), next(gen), {"standin-levels": PRESET})
    next(gen, None)


@pytest.fixture
def using(site: Site, monkeypatch: pytest.MonkeyPatch) -> Site:
    for name, value in site.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SPECBENCH_BROKER_URL", site.broker)
    return site


@pytest.mark.timeout(120)
def test_a_killed_worker_resumes_at_the_level_it_reached(using: Site) -> None:
    with killed_worker(using, "levels") as run:
        batch = run.submit(plan_batch("standin-levels", queue="levels"))
        before = run.wait(lambda e: (
            e["batch"] == batch and e["type"] == "approach.phase" and e.get("index") == 2
            and e.get("phase") == "repetition" and e.get("load") == {"max-concurrency": 4}),
            timeout=60)
        run.worker.kill9()  # during level 2 of `second`
        assert leftovers(), "the dead worker's server should outlive it"
        checkpoint = Path(using.env["SPECBENCH_DATA_DIR"]) / "logs" / batch / \
            "second.levels.json"
        assert checkpoint.exists()
        after = run.resume(timeout=60)
    assert after[-1]["type"] == "batch.finished"
    measured = [e["value"] for e in before if e["type"] == "approach.phase"
                and e["index"] == 2 and e["phase"] == "result" and not e.get("warmup")
                and e.get("load") == {"max-concurrency": 1}]
    assert len(measured) == 1
    again = [e for e in after if e["type"] == "approach.phase" and e["index"] == 2]
    assert [e["phase"] for e in again].count("launching") == 1  # the server starts again
    assert [e["level"] for e in again if e["phase"] == "level"] == [2, 3]
    assert not any(e.get("load") == {"max-concurrency": 1} for e in again)
    assert not any(e["type"] == "approach.phase" and e["index"] == 1 for e in after)
    records = Store(using.database).records(batch)
    assert [(r.approach, r.status) for r in records] == [("baseline", "ok"), ("second", "ok")]
    second = records[1]
    assert [e["load"]["max-concurrency"] for e in second.by_load] == [1, 4, 16]
    assert all(e["status"] == "ok" for e in second.by_load)
    assert second.by_load[0]["metrics"]["output_throughput"] == measured  # from the checkpoint
    assert all("p99_ttft_ms" in e["metrics"] for e in second.by_load)
    assert not checkpoint.exists()
    assert leftovers() == []
