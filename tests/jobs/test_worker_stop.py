"""SIGTERM to a busy `specbench worker` (issue 32, item 9): it stops the running server, hands its
batch back and exits within seconds, instead of waiting the batch out (hours on a real one, a
kill under compose's stop grace).

A real worker on a Redis database of its own, the stand-in SGLang: the second configuration's
server takes as long to load as the worker's SLOW_START says (the preset's `${SLOW_START}`), a
minute for the worker that is stopped, a moment for the one that resumes the batch.

Skipped without Redis unless SPECBENCH_REQUIRE_REDIS=1.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.batches.planning import plan_batch
from jobs.broker.dispatcher import DistributedDispatcher
from jobs.store import Store
from tests.jobs.test_distributed import (
    TAG,
    Site,
    Worker,
    collect,
    is_end,
    is_phase,
    leftovers,
    make_site,
    pipeline_preset,
    redis_db,
    wait_until,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]

EXIT_WITHIN_S = 60.0  # a hang guard: the server it stops would load for an hour


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    gen = redis_db()
    preset = pipeline_preset("standin-stop", reps=1, tag=TAG, second_startup="${SLOW_START}")
    made = make_site(tmp_path, next(gen), {"standin-stop": preset})
    for name, value in made.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SPECBENCH_BROKER_URL", made.broker)
    yield made
    next(gen, None)


@pytest.mark.timeout(120)
def test_sigterm_stops_the_server_hands_the_batch_back_and_exits_within_seconds(
    site: Site,
) -> None:
    site.env["SLOW_START"] = "60"  # the server the stop finds loading
    worker = Worker(site, "stopq")
    resumed: Worker | None = None
    d = DistributedDispatcher(Store(site.database), site.broker)
    sub = d.subscribe()
    try:
        batch = d.submit(plan_batch("standin-stop", queue="stopq"), requested_by="U1").batch.id
        collect(sub, is_phase(batch, 2, "launching"), timeout=30)
        wait_until(leftovers, timeout=60, what="the slow server loading")
        worker.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: worker.proc.poll() is not None, timeout=EXIT_WITHIN_S,
                   what="the worker to exit after SIGTERM")
        assert worker.proc.returncode == 0, worker.output()
        assert leftovers() == [], "the server outlived its worker"
        paused = collect(sub, lambda e: e["batch"] == batch and e["type"] == "batch.paused",
                         timeout=60)[-1]
        assert "SIGTERM" in paused["reason"] and "runs again" in paused["reason"]
        assert "handed back" in worker.logged("handed back")
        store = Store(site.database)
        row = store.get_batch(batch)
        assert row is not None and row.state == "running" and row.lease_owner is None
        assert [(r.approach, r.status) for r in store.records(batch)] == [("baseline", "ok")]
        site.env["SLOW_START"] = "0.2"
        resumed = Worker(site, "stopq")  # takes the message the stopped worker sent back
        events = collect(sub, is_end(batch), timeout=40)
    finally:
        sub.close()
        d.close()
        if resumed is not None:
            resumed.stop()
        worker.stop()
    launches = [e["index"] for e in events if e["type"] == "approach.phase"
                and e["phase"] == "launching"]
    # the interrupted second, the third, then the baseline's closing run (docs/contracts.md
    # "Noise, measured"): its first run is not repeated
    assert launches == [2, 3, 4], "the baseline must not run again but last; the second must"
    assert events[-1]["type"] == "batch.finished" and events[-1]["state"] == "done"
    records = Store(site.database).records(batch)
    assert [(r.approach, r.status) for r in records] == [
        ("baseline", "ok"), ("second", "ok"), ("third", "ok")]
    assert leftovers() == []
