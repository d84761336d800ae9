"""Cancel with the worker dead (issue 20 item 5, docs/contracts.md "Every batch ends"): a `specbench
worker` killed with -9 mid-batch leaves its server and the server's children running; `specbench
cancel` on the host ends the batch at once and kills them, without waiting for a worker to come
back, and a worker started later does not run the batch again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jobs.batches.planning import plan_batch
from jobs.store import Store
from tests.jobs.test_distributed import (
    TAG,
    Site,
    Worker,
    cli,
    collect,
    dispatcher,
    is_phase,
    leftovers,
    make_site,
    pipeline_preset,
    redis_db,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    gen = redis_db()
    preset = pipeline_preset("standin-children", reps=3, tag=TAG,
                             second={"STANDIN_THROUGHPUT": "90", "STANDIN_MODE": "children"})
    assert "STANDIN_MODE: children" in preset
    yield make_site(tmp_path_factory.mktemp("dead-cancel"), next(gen),
                    {"standin-children": preset}, ttl=30)
    next(gen, None)


@pytest.mark.timeout(120)
def test_cancel_with_the_worker_dead_ends_the_batch_and_kills_the_server_and_its_children(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in site.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SPECBENCH_BROKER_URL", site.broker)
    worker = Worker(site, "gone")
    d = dispatcher(site)
    sub = d.subscribe()
    later: Worker | None = None
    try:
        batch = d.submit(plan_batch("standin-children", queue="gone"), requested_by="U1").batch.id
        collect(sub, is_phase(batch, 2, "repetition"), timeout=60)
        worker.kill9()
        left = leftovers()
        assert len(left) >= 3, f"the server and its two children outlive the worker: {left}"

        done = cli(site, "cancel", batch)  # no worker lives to answer: it must not wait for one
        assert done.returncode == 0, done.stderr
        assert f"batch {batch}: cancel requested by" in done.stdout
        assert "ended cancelled:" in done.stdout and "died" in done.stdout, done.stdout
        assert "killed" in done.stdout
        assert leftovers() == []
        store = Store(site.database)
        row = store.get_batch(batch)
        assert row is not None and row.state == "cancelled"
        statuses = [(r.approach, r.status) for r in store.records(batch)]
        assert statuses == [("baseline", "ok"), ("second", "cancelled"), ("third", "skipped")]

        # A worker that comes back finds nothing to resume: its start-up sweep, the only thing
        # that re-sends a batch (messages are acked when taken), runs before it says "ready."
        later = Worker(site, "gone")
        assert "recovery: re-sent" not in later.output()
        assert Store(site.database).get_batch(batch).state == "cancelled"  # type: ignore[union-attr]
        assert leftovers() == []
    finally:
        sub.close()
        d.close()
        worker.stop()
        if later is not None:
            later.stop()
