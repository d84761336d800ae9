"""Server logs are kept `SPECBENCH_LOG_RETENTION_DAYS` (default 30), the store's records for ever
(issue 20, item 6): a batch's folder under the data dir's `logs/` untouched for longer is
removed when a worker starts (and hourly), or when an embedded process starts its worker;
an unfinished batch's logs, `errors.log` and anything else stay.

Real processes: the `specbench` CLI running a stand-in batch in embedded mode, and a
`specbench worker` on a Redis database of the test's own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.batches import retention
from jobs.store import Store
from tests.conftest import make_plan
from tests.jobs.test_distributed import (
    REPO,
    TAG,
    Site,
    Worker,
    make_site,
    pipeline_preset,
    redis_db,
    wait_until,
)

DAY = 86400.0


def aged(folder: Path, *, days: float) -> Path:
    """`folder` and everything in it last modified `days` ago."""
    folder.mkdir(parents=True, exist_ok=True)
    then = time.time() - days * DAY
    for path in [*folder.rglob("*"), folder]:
        os.utime(path, (then, then))
    return folder


@pytest.fixture
def logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SPECBENCH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv(retention.ENV, raising=False)
    folder = tmp_path / "data" / "logs"
    folder.mkdir(parents=True)
    return folder


def test_old_folders_go_and_the_rest_stays(logs: Path) -> None:
    old = logs / "b-0ld00001"
    (old / "sub").mkdir(parents=True)
    (old / "baseline.log").write_text("x" * 51_000)
    (old / "sub" / "bench.jsonl").write_text("{}")
    aged(old, days=31)
    recent_file = aged(logs / "b-0ld00002", days=40)
    (recent_file / "approach.log").write_text("appended today")  # the newest file counts
    aged(logs / "b-running1", days=90)
    aged(logs / "not-a-batch", days=90)
    (logs / "errors.log").write_text("--- incident\n")
    os.utime(logs / "errors.log", (0, 0))
    assert retention.prune_logs(days=30, keep={"b-running1"}) == ["b-0ld00001"]
    assert sorted(p.name for p in logs.iterdir()) == [
        "b-0ld00002", "b-running1", "errors.log", "not-a-batch"]
    assert retention.prune_logs(days=None) == []


@pytest.mark.parametrize("raw,days", [("", 30.0), ("7", 7.0), ("0.5", 0.5), ("off", None),
                                      ("0", None), ("never", None), ("abc", None),
                                      ("-3", None), ("inf", None), ("nan", None)])
def test_the_setting(monkeypatch: pytest.MonkeyPatch, raw: str, days: float | None) -> None:
    monkeypatch.setenv(retention.ENV, raw)
    assert retention.retention_days() == days


def test_pruning_is_skipped_when_the_unfinished_batches_are_unknown(logs: Path) -> None:
    aged(logs / "b-0ld00003", days=400)

    def store_away() -> list[str]:
        raise OSError("database unreachable")

    retention.start_pruning(store_away, every=None).join(timeout=10)
    assert (logs / "b-0ld00003").is_dir()


def pace_site(root: Path, broker: str) -> Site:
    preset = pipeline_preset("standin", reps=1, tag=TAG, second_startup="0.2")
    return make_site(root, broker, {"standin": preset})


@pytest.fixture
def broker() -> Iterator[str]:
    gen = redis_db()
    yield next(gen)
    next(gen, None)


@pytest.mark.redis
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_worker_start_removes_old_logs_and_keeps_the_records(
    tmp_path: Path, broker: str
) -> None:
    site = pace_site(tmp_path, broker)
    env = site.worker_env()
    embedded = {k: v for k, v in env.items() if k != "SPECBENCH_BROKER_URL"}
    done = subprocess.run([sys.executable, "-m", "bot.cli.main", "run", "standin"], env=embedded,
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    store = Store(site.database)
    [ran] = store.list_batches()
    logs = Path(site.env["SPECBENCH_DATA_DIR"]) / "logs"
    assert sorted(p.name for p in (logs / ran.id).iterdir())  # its servers' logs
    aged(logs / ran.id, days=45)
    running, _ = store.create_batch(batch_id="b-stillrun", preset="eagle3", engine="local",
                                    queue="elsewhere", requested_by="U1", plan=make_plan())
    store.set_state(running.id, "running")
    aged(logs / running.id, days=45)
    recent = aged(logs / "b-recent01", days=29)
    worker = Worker(site, "keepq")
    try:
        wait_until(lambda: not (logs / ran.id).exists(), timeout=30,
                   what="the worker to remove the old logs")
    finally:
        worker.stop()
    assert (logs / running.id).is_dir() and recent.is_dir()
    assert [r.approach for r in store.records(ran.id)] == ["baseline", "second", "third"]
    shown = subprocess.run([sys.executable, "-m", "bot.cli.main", "show", ran.id], env=embedded,
                           cwd=REPO, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and ran.id in shown.stdout, shown.stderr
    assert "removed the server logs of 1 batch" in worker.output()


@pytest.mark.timeout(120)
def test_an_embedded_run_removes_old_logs_too(tmp_path: Path) -> None:
    site = pace_site(tmp_path, "unused")
    env = {k: v for k, v in site.worker_env().items() if k != "SPECBENCH_BROKER_URL"}
    env[retention.ENV] = "10"
    logs = Path(site.env["SPECBENCH_DATA_DIR"]) / "logs"
    old, young = aged(logs / "b-0ld00004", days=11), aged(logs / "b-young001", days=9)
    done = subprocess.run([sys.executable, "-m", "bot.cli.main", "run", "standin"], env=env,
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not old.exists() and young.is_dir()
    [ran] = Store(site.database).list_batches()
    assert (logs / ran.id).is_dir()  # its own, new
