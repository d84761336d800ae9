"""A full data dir pauses a batch and resumes it once space is freed (issue 32, item 9).

A real `specbench worker` on a Redis database of its own, the stand-in SGLang, and a data dir
that is a real tmpfs of 2 MiB (server logs, result files and the process registry all go
there), filled by the test until writes answer ENOSPC. A batch taken while it is full, and one
whose configuration is running when it fills, each pause with a line (`batch.paused`, shown in
the thread's progress message), run that configuration again once the test frees the space, and
end `done`: nothing is failed, nothing already measured is run twice.

Skipped where this process cannot mount a tmpfs (not root); test_disk_full_edge.py covers the
same path without privileges, ENOSPC injected at the file writes.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.thread.progress_message import ProgressMessage
from jobs.batches.planning import plan_batch
from jobs.broker.dispatcher import DistributedDispatcher
from jobs.core.events import Event
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
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]

SIZE = "2m"


def _mount(folder: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs for a full data dir needs root")
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")


class Disk:
    """The data dir's tmpfs: `fill` writes until it answers ENOSPC, `free` gives it back."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.filler = folder / "filler"

    def fill(self) -> None:
        with open(self.filler, "ab", buffering=0) as handle:
            for size in (64 * 1024, 4096, 512):  # down to the last few bytes
                while True:
                    try:
                        handle.write(bytes(size))
                    except OSError as exc:
                        assert exc.errno == errno.ENOSPC
                        break

    def free(self) -> None:
        self.filler.unlink()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("full-disk")
    data = root / "data-tmpfs"
    _mount(data)
    gen = redis_db()
    try:
        preset = pipeline_preset("standin-full", reps=1, tag=TAG, second_startup="2")
        made = make_site(root, next(gen), {"standin-full": preset})
        made.env["SPECBENCH_DATA_DIR"] = str(data)
        yield made
    finally:
        next(gen, None)
        subprocess.run(["umount", "--lazy", str(data)], capture_output=True)


@pytest.fixture(scope="module")
def worker(site: Site) -> Iterator[Worker]:
    started = Worker(site, "fullq")
    yield started
    started.stop()


@pytest.fixture
def disk(site: Site) -> Disk:
    return Disk(Path(site.env["SPECBENCH_DATA_DIR"]))


@pytest.fixture
def dispatcher(site: Site, monkeypatch: pytest.MonkeyPatch) -> Iterator[DistributedDispatcher]:
    for name, value in site.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SPECBENCH_BROKER_URL", site.broker)
    made = DistributedDispatcher(Store(site.database), site.broker)
    yield made
    made.close()


def is_paused(batch: str) -> Callable[[Event], bool]:
    return lambda e: e["batch"] == batch and e["type"] == "batch.paused"


def _check_resumed(site: Site, batch: str, events: list[Event], *, launches: list[int]) -> None:
    kinds = [e["type"] for e in events]
    paused, resumed = kinds.index("batch.paused"), kinds.index("batch.resumed")
    assert paused < resumed < len(kinds) - 1 and kinds.count("batch.paused") == 1
    assert events[-1]["type"] == "batch.finished" and events[-1]["state"] == "done"
    assert [e["index"] for e in events if e["type"] == "approach.phase"
            and e["phase"] == "launching"] == launches
    store = Store(site.database)
    assert store.get_batch(batch).state == "done"  # type: ignore[union-attr]
    assert [(r.approach, r.status) for r in store.records(batch)] == [
        ("baseline", "ok"), ("second", "ok"), ("third", "ok")]
    assert leftovers() == []


def _progress_text(batch: str, events: list[Event]) -> str:
    """The thread's progress message as these events leave it."""
    progress = ProgressMessage.of(batch, ["baseline", "second", "third"])
    for event in events:
        progress.apply(event)
    return progress.render().text


@pytest.mark.timeout(120)
def test_a_batch_taken_while_the_data_dir_is_full_waits_and_resumes(
    site: Site, worker: Worker, disk: Disk, dispatcher: DistributedDispatcher,
) -> None:
    sub = dispatcher.subscribe()
    try:
        disk.fill()
        batch = dispatcher.submit(plan_batch("standin-full", queue="fullq"),
                                  requested_by="U1").batch.id
        before = collect(sub, is_paused(batch), timeout=60)
        paused = before[-1]
        assert paused["cause"] == "disk-full" and paused["approach"] == "baseline"
        assert f"the data dir {Path(disk.folder).resolve()} is full" in paused["reason"]
        assert "Paused: the data dir" in _progress_text(batch, before)
        store = Store(site.database)
        row = store.get_batch(batch)
        assert row is not None and row.state == "running" and store.records(batch) == []
        disk.free()
        after = collect(sub, is_end(batch), timeout=60)
    finally:
        sub.close()
    assert "Paused" not in _progress_text(batch, before + after)
    # 4: the baseline's closing run
    _check_resumed(site, batch, before + after, launches=[1, 1, 2, 3, 4])


@pytest.mark.timeout(120)
def test_a_data_dir_that_fills_mid_run_pauses_and_runs_that_configuration_again(
    site: Site, worker: Worker, disk: Disk, dispatcher: DistributedDispatcher,
) -> None:
    sub = dispatcher.subscribe()
    try:
        batch = dispatcher.submit(plan_batch("standin-full", queue="fullq"),
                                  requested_by="U1").batch.id
        before = collect(sub, is_phase(batch, 2, "launching"), timeout=60)
        disk.fill()  # the second server loads for 2 s: its log and result cannot be written
        before += collect(sub, is_paused(batch), timeout=60)
        assert before[-1]["approach"] == "second"
        assert [r.approach for r in Store(site.database).records(batch)] == ["baseline"]
        disk.free()
        after = collect(sub, is_end(batch), timeout=60)
    finally:
        sub.close()
    # 4: the baseline's closing run
    _check_resumed(site, batch, before + after, launches=[1, 2, 2, 3, 4])
