"""A capacity search resumes at the level it reached (docs/contracts.md "Capacity under the
SLO"): a `specbench worker` killed (kill -9) during the third level the search chose for a
configuration, restarted, finishes the batch without benchmarking the first two again, and the
search goes on from them. Real Redis and real workers, as tests/jobs/test_level_resume.py;
skipped without Redis."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.batches.planning import plan_batch
from jobs.core.capacity import capacity_of
from jobs.store import Store
from tests.jobs.test_distributed import (
    TAG,
    Site,
    Worker,
    collect,
    dispatcher,
    is_end,
    leftovers,
    make_site,
    redis_db,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]

PRESET = f"""\
name: standin-capacity
description: a stand-in batch with a capacity search
engine: sglang
queue: default
metric: output_throughput
min_effect_pct: 2.0
reps: 1
warmup: false
timeouts: {{startup_s: 60, bench_s: 20}}
bench: {{dataset-name: random-ids, random-input-len: 8, random-output-len: 4,
        random-range-ratio: 1.0, num-prompts: 16}}
capacity: {{knob: max-concurrency, from: 1, max: 16}}
slo: {{median_ttft_ms: 400}}
overridable: []
baseline:
  server_args: {{model-path: /models/tiny-llama, tp-size: 1, mem-fraction-static: 0.8,
                cuda-graph-max-bs: 8}}
  env: {{STANDIN_STARTUP_S: "0.2", STANDIN_TAG: "{TAG}", STANDIN_TTFT_GROWTH: "0.4"}}
approaches:
  - name: second
    hypothesis: the configuration a test interrupts
    env: {{STANDIN_THROUGHPUT: "90"}}
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    gen = redis_db()
    yield make_site(tmp_path_factory.mktemp("capacity"), next(gen),
                    {"standin-capacity": PRESET})
    next(gen, None)


@pytest.fixture
def using(site: Site, monkeypatch: pytest.MonkeyPatch) -> Site:
    for name, value in site.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SPECBENCH_BROKER_URL", site.broker)
    return site


@pytest.mark.timeout(180)
def test_a_killed_worker_resumes_the_search_at_the_level_it_reached(using: Site) -> None:
    worker = Worker(using, "capacity")
    d = dispatcher(using)
    sub = d.subscribe()
    try:
        batch = d.submit(plan_batch("standin-capacity", queue="capacity"),
                         requested_by="U1").batch.id
        before = collect(sub, lambda e: (
            e["batch"] == batch and e["type"] == "approach.phase" and e.get("index") == 2
            and e.get("phase") == "repetition" and e.get("load") == {"max-concurrency": 4}),
            timeout=90)
        worker.kill9()  # during the search's third level of `second`
        checkpoint = Path(using.env["SPECBENCH_DATA_DIR"]) / "logs" / batch / \
            "second.levels.json"
        assert checkpoint.exists()
        restarted = Worker(using, "capacity")
        try:
            after = collect(sub, is_end(batch), timeout=120)
        finally:
            restarted.stop()
    finally:
        worker.stop()
        sub.close()
        d.close()
    assert after[-1]["type"] == "batch.finished"
    first = [e["value"] for e in before if e["type"] == "approach.phase" and e["index"] == 2
             and e["phase"] == "result" and e.get("load") == {"max-concurrency": 1}]
    assert len(first) == 1
    again = [e for e in after if e["type"] == "approach.phase" and e["index"] == 2]
    assert [e["phase"] for e in again].count("launching") == 1  # the server starts again
    searched = [(e["level"], e["load"]["max-concurrency"]) for e in again
                if e["phase"] == "level"]
    assert searched[0] == (3, 4)  # the search goes on from the two levels it had
    assert not any(e.get("load") in ({"max-concurrency": 1}, {"max-concurrency": 2})
                   for e in again)
    records = Store(using.database).records(batch)
    assert [(r.approach, r.status) for r in records] == [("baseline", "ok"), ("second", "ok")]
    found = capacity_of(records[1])
    baseline = capacity_of(records[0])
    assert found is not None and baseline is not None
    assert [lv["load"]["max-concurrency"] for lv in found.levels][:2] == [1, 2]
    assert found.levels[0]["metrics"]["output_throughput"] == first  # from the checkpoint
    # the resumed search took the same path as an uninterrupted one (the baseline's: the same
    # TTFT model) and found the same capacity
    assert [lv["load"] for lv in found.levels] == [lv["load"] for lv in baseline.levels]
    assert found.value == baseline.value == 6 and found.complete
    assert not checkpoint.exists()
    assert leftovers() == []
