"""The store, on SQLite and on PostgreSQL alike (one suite, parametrised over both backends)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import IntegrityError

from jobs.core.records import RunRecord, to_record
from jobs.store import Store, UnknownBatch
from jobs.store.database import head_revision
from jobs.store.schema import Base
from tests.conftest import make_plan
from tests.standin.postgres import PG_ADMIN_URL as PG_ADMIN_URL
from tests.standin.postgres import fresh_database

REPO = Path(__file__).resolve().parents[2]

T = TypeVar("T")


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh database for this test session, dropped at its end."""
    with fresh_database() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database: a new SQLite file in a folder yet to be made, or a wiped PG schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'data' / 'specbench.db'}"
    return _wiped(request.getfixturevalue("postgres_url"))


def _wiped(url: str) -> str:
    """`url`'s PostgreSQL database with its public schema dropped and made again: empty."""
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text("DROP SCHEMA public CASCADE"))
        connection.execute(text("CREATE SCHEMA public"))
    engine.dispose()
    return url


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    with Store(url) as opened:
        yield opened


def new_batch(store: Store, batch_id: str = "b-7f3a9c", **kwargs: Any) -> str:
    fields: dict[str, Any] = {
        "preset": "eagle3", "engine": "local", "queue": "default", "requested_by": "U123",
        "plan": make_plan(),
    }
    fields.update(kwargs)
    store.create_batch(batch_id=batch_id, **fields)
    return batch_id


def make_record(batch: str, approach: str, **kwargs: Any) -> RunRecord:
    data: dict[str, Any] = {
        "batch": batch, "preset": "eagle3", "approach": approach,
        "role": "baseline" if approach == "baseline" else "approach", "status": "ok",
        "metrics": {"output_throughput": [80.0, 82.0, 81.5], "accept_length": None},
        "started_at": "2026-12-02T10:00:00Z", "finished_at": "2026-12-02T10:04:10Z",
    }
    data.update(kwargs)
    return to_record(data)


def in_threads(count: int, work: Callable[[int], T]) -> list[T]:
    """Run `work(i)` in `count` threads released together; re-raise the first failure."""
    barrier = threading.Barrier(count)
    results: dict[int, T] = {}
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as exc:  # surfaced below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    if errors:
        raise errors[0]
    return [results[i] for i in range(count)]


def test_a_new_store_is_built_at_the_head_and_migrating_again_does_nothing(url: str) -> None:
    with Store(url) as store:
        store.migrate()
        store.migrate()
    with Store(url) as again:
        again.migrate()
        assert again.list_batches() == []
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            tables = set(inspect(connection).get_table_names())
            assert {"alembic_version", "batches", "runs"} <= tables
            assert MigrationContext.configure(connection).get_current_revision() == "0011"
            assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
    finally:
        engine.dispose()


def _schema(url: str) -> dict[str, Any]:
    """Each table's columns (name, type, nullability), primary key, indexes, unique and foreign
    keys, as the database itself reports them: what the store's queries rely on (the columns'
    order apart: every query names its columns, and a migration adds its own at the end)."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            found = inspect(connection)
            return {table: {
                "columns": sorted((c["name"], str(c["type"]), c["nullable"])
                                  for c in found.get_columns(table)),
                "primary": found.get_pk_constraint(table)["constrained_columns"],
                "indexes": sorted((i["name"], tuple(i["column_names"]), bool(i["unique"]))
                                  for i in found.get_indexes(table)),
                "unique": sorted(tuple(u["column_names"])
                                 for u in found.get_unique_constraints(table)),
                "foreign": sorted((tuple(f["constrained_columns"]), f["referred_table"])
                                  for f in found.get_foreign_keys(table)),
            } for table in sorted(found.get_table_names())}
    finally:
        engine.dispose()


def _upgrade_with_alembic(url: str, revision: str = "head") -> None:
    from alembic import command
    from alembic.config import Config

    from jobs.store.database import _MIGRATIONS

    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url)
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
    finally:
        engine.dispose()


def test_the_migrations_from_empty_build_what_a_new_store_builds(
    url: str, tmp_path: Path
) -> None:
    """A new database is built from the models and stamped at the head (`_create_at_head`); the
    migrations, run from empty by Alembic, must build the same schema, or an upgraded store
    would differ from a new one."""
    _upgrade_with_alembic(url)
    migrated = _schema(url)
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
    finally:
        engine.dispose()
    if url.startswith("sqlite"):
        fresh = f"sqlite:///{tmp_path / 'fresh' / 'specbench.db'}"
    else:
        fresh = _wiped(url)
    with Store(fresh) as store:
        store.migrate()
    assert _schema(fresh) == migrated


def test_a_store_starts_without_alembic_on_a_new_database_and_at_the_head(url: str) -> None:
    """The head read from the versions' names is Alembic's own; a database already there is
    known to be so, and a new one is built there, without importing Alembic (most of a
    command's start)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(REPO / "jobs" / "store" / "migrations"))
    assert head_revision() == ScriptDirectory.from_config(config).get_current_head()
    code = ("import sys; from jobs.store import Store; s = Store(sys.argv[1]); "
            "print(s.is_at_head()); s.list_batches(); print(s.is_at_head()); "
            "print(any(m.startswith('alembic') for m in sys.modules))")
    for _ in ("new", "at the head"):
        done = subprocess.run([sys.executable, "-c", code, url], cwd=REPO, capture_output=True,
                              text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert done.stdout.split()[1:] == ["True", "False"], done.stderr
    assert done.stdout.split()[0] == "True"


def test_an_older_database_is_upgraded_by_the_migrations(url: str) -> None:
    """A database at an older revision is not new: the store runs Alembic's migrations on it."""
    _upgrade_with_alembic(url, "0010")
    with Store(url) as store:
        assert not store.is_at_head()
        store.migrate()
        assert store.is_at_head()
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            assert MigrationContext.configure(connection).get_current_revision() == "0011"
            assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
    finally:
        engine.dispose()


def test_concurrent_first_use_migrates_once(url: str) -> None:
    stores = [Store(url) for _ in range(4)]
    try:
        in_threads(4, lambda i: new_batch(stores[i], f"b-{i}"))
        assert len(stores[0].list_batches()) == 4
    finally:
        for store in stores:
            store.close()


def test_the_default_url_is_sqlite_in_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPECBENCH_DATABASE_URL", raising=False)
    monkeypatch.setenv("SPECBENCH_DATA_DIR", str(tmp_path / "nested" / "data"))
    with Store() as store:
        new_batch(store)
        assert (tmp_path / "nested" / "data" / "specbench.db").is_file()
        engine = create_engine(store.url)
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        engine.dispose()


def test_a_record_round_trips_exactly(store: Store) -> None:
    data = {
        "batch": "b-7f3a9c", "preset": "eagle3", "approach": "eagle3-nccl-tree",
        "role": "approach", "parent": "eagle3", "hypothesis": "Tree beats Ring over PCIe",
        "change": {
            "server_args": {"speculative-algorithm": "EAGLE3"}, "env": {"NCCL_ALGO": "Tree"}
        },
        "server_args": {"model-path": "/models/Kimi-K2.5", "tp-size": 8, "enable-x": True},
        "env": {"NCCL_ALGO": "Tree"}, "status": "failed", "exit_code": 1,
        "log_tail": "line 1\nRuntimeError: ünïcode ✓\n", "metrics": {"output_throughput": []},
        "fingerprint": {"gpu": "NVIDIA H200", "gpu_count": 8, "nccl": "2.27.3"},
        "started_at": "2026-12-02T10:00:00Z", "finished_at": "2026-12-02T10:04:10Z",
        "unknown_key": {"kept": [1, 2.5, None]}, "another": "too",
    }
    new_batch(store)
    store.put_record(to_record(data), position=3)
    [back] = store.records("b-7f3a9c")
    assert back == to_record(data)
    assert back.to_dict() == data
    assert json.loads(back.to_json()) == data


def test_an_idempotency_key_returns_the_same_batch(store: Store) -> None:
    first, created = store.create_batch(
        batch_id="b-1", preset="eagle3", engine="local", queue="default", requested_by="U1",
        plan=make_plan(reps=1), idempotency_key="slack:T1:123.456",
    )
    again, created_again = store.create_batch(
        batch_id="b-2", preset="eagle3", engine="local", queue="default", requested_by="U1",
        plan=make_plan(reps=2), idempotency_key="slack:T1:123.456",
    )
    assert (created, created_again) == (True, False)
    assert again == first and again.plan == make_plan(reps=1)
    assert store.get_batch("b-2") is None


def test_an_idempotency_key_is_race_safe(store: Store) -> None:
    store.migrate()

    def create(i: int) -> tuple[str, bool]:
        row, created = store.create_batch(
            batch_id=f"b-{i}", preset="p", engine="local", queue="default", requested_by="U1",
            plan=make_plan(), idempotency_key="same-key",
        )
        return row.id, created

    results = in_threads(8, create)
    assert sum(created for _, created in results) == 1
    assert len({batch_id for batch_id, _ in results}) == 1
    assert len(store.list_batches()) == 1


def test_a_duplicate_batch_id_without_a_key_is_refused(store: Store) -> None:
    new_batch(store, "b-1")
    with pytest.raises(IntegrityError):
        new_batch(store, "b-1")


def test_a_new_batch_is_queued_with_utc_times(store: Store) -> None:
    row, _ = store.create_batch(
        batch_id="b-1", preset="eagle3", engine="sglang", queue="gpu-a", requested_by="U1",
        plan=make_plan(bench={"nested": {"a": [1, 2]}}), channel="C1", thread_ts="123.456",
    )
    assert row == store.get_batch("b-1")
    assert (row.state, row.cancel_requested, row.report, row.host) == ("queued", False, None, None)
    assert row.created_at.tzinfo is UTC
    assert abs(datetime.now(UTC) - row.created_at) < timedelta(minutes=1)
    assert store.get_batch("b-unknown") is None


def test_put_record_replaces_a_rerun(store: Store) -> None:
    new_batch(store)
    store.put_record(make_record("b-7f3a9c", "eagle3", status="failed"), position=1)
    store.put_record(make_record("b-7f3a9c", "baseline"), position=0)
    store.put_record(make_record("b-7f3a9c", "eagle3", status="ok", exit_code=0), position=1)
    records = store.records("b-7f3a9c")
    assert [(r.approach, r.status) for r in records] == [("baseline", "ok"), ("eagle3", "ok")]
    assert records[1].exit_code == 0


def test_list_filters(store: Store) -> None:
    start = datetime(2026, 12, 1, tzinfo=UTC)
    for day, (batch_id, queue) in enumerate([("b-a", "q1"), ("b-b", "q2"), ("b-c", "q1")]):
        new_batch(store, batch_id, queue=queue, created_at=start + timedelta(days=day))
    store.set_state("b-b", "running")
    store.set_state("b-c", "done")

    def ids(**kwargs: Any) -> list[str]:
        return [row.id for row in store.list_batches(**kwargs)]

    assert ids() == ["b-a", "b-b", "b-c"]
    assert ids(since=start + timedelta(hours=12)) == ["b-b", "b-c"]
    assert ids(states=["queued", "running"]) == ["b-a", "b-b"]
    assert ids(queue="q1") == ["b-a", "b-c"]
    assert ids(queue="q1", states=["done"]) == ["b-c"]
    assert ids(limit=2) == ["b-a", "b-b"]
    assert ids(states=[]) == []
    latest = store.latest_batch()
    assert latest is not None and latest.id == "b-c"


def test_latest_batch_of_an_empty_store_is_none(store: Store) -> None:
    assert store.latest_batch() is None


def test_set_state_stamps_times(store: Store) -> None:
    new_batch(store)
    assert store.set_state("b-7f3a9c", "running", host="gpu-host-1")
    running = store.get_batch("b-7f3a9c")
    assert running is not None and running.started_at is not None
    assert (running.state, running.host, running.finished_at) == ("running", "gpu-host-1", None)
    store.set_state("b-7f3a9c", "running")  # a resumed batch keeps its first start
    assert store.get_batch("b-7f3a9c") == running
    assert store.set_state("b-7f3a9c", "failed", error="worker lost")
    failed = store.get_batch("b-7f3a9c")
    assert failed is not None and failed.finished_at is not None
    assert failed.finished_at.tzinfo is UTC and failed.finished_at >= running.started_at
    assert (failed.state, failed.error, failed.host) == ("failed", "worker lost", "gpu-host-1")


def test_set_state_only_from(store: Store) -> None:
    new_batch(store)
    store.set_state("b-7f3a9c", "running")
    assert not store.set_state("b-7f3a9c", "cancelled", only_from=["queued"])
    assert store.set_state("b-7f3a9c", "cancelled", only_from=["queued", "running"])
    row = store.get_batch("b-7f3a9c")
    assert row is not None and row.state == "cancelled"


def test_writes_to_an_unknown_batch_raise(store: Store) -> None:
    with pytest.raises(UnknownBatch):
        store.set_state("b-nope", "running")
    with pytest.raises(UnknownBatch):
        store.set_thread("b-nope", "C1", "1.2")
    with pytest.raises(UnknownBatch):
        store.end("b-nope", "done", report={})
    with pytest.raises(ValueError):
        store.set_state("b-nope", "exploded")


def test_cancel_flags(store: Store) -> None:
    new_batch(store)
    assert not store.is_cancel_requested("b-7f3a9c")
    assert store.request_cancel("b-7f3a9c")
    assert store.is_cancel_requested("b-7f3a9c")
    assert not store.request_cancel("b-nope")
    assert not store.is_cancel_requested("b-nope")


def test_thread_and_report(store: Store) -> None:
    new_batch(store)
    store.set_thread("b-7f3a9c", "C42", "1733140800.000100")
    report = {"batch": "b-7f3a9c", "results": [{"approach": "eagle3", "delta_pct": -34.0}],
              "key_achievement": None, "future_key": "kept"}
    assert store.end("b-7f3a9c", "done", report=report)
    row = store.get_batch("b-7f3a9c")
    assert row is not None
    assert (row.state, row.channel, row.thread_ts, row.report) == (
        "done", "C42", "1733140800.000100", report)


def test_delete_batch_removes_its_runs(store: Store, url: str) -> None:
    new_batch(store, "b-1")
    new_batch(store, "b-2")
    store.put_records([(0, make_record("b-1", "baseline")), (0, make_record("b-2", "baseline"))])
    assert store.delete_batch("b-1")
    assert not store.delete_batch("b-1")
    assert store.get_batch("b-1") is None and store.records("b-1") == []
    assert len(store.records("b-2")) == 1
    engine = create_engine(url)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM runs")).scalar() == 1
    engine.dispose()


def test_lease_refuses_a_second_owner(store: Store) -> None:
    new_batch(store)
    assert store.try_acquire_lease("b-7f3a9c", "w1", 60)
    assert not store.try_acquire_lease("b-7f3a9c", "w2", 60)
    assert store.try_acquire_lease("b-7f3a9c", "w1", 60)  # the holder may take it again
    assert not store.renew_lease("b-7f3a9c", "w2", 60)
    assert store.renew_lease("b-7f3a9c", "w1", 60)
    store.release_lease("b-7f3a9c", "w2")  # not the holder: no effect
    assert not store.try_acquire_lease("b-7f3a9c", "w2", 60)
    store.release_lease("b-7f3a9c", "w1")
    row = store.get_batch("b-7f3a9c")
    assert row is not None and (row.lease_owner, row.lease_expires_at) == (None, None)
    assert store.try_acquire_lease("b-7f3a9c", "w2", 60)
    assert not store.try_acquire_lease("b-unknown", "w2", 60)


def test_an_expired_lease_is_stolen(store: Store) -> None:
    new_batch(store)
    assert store.try_acquire_lease("b-7f3a9c", "w1", 0.05)
    time.sleep(0.1)
    assert store.try_acquire_lease("b-7f3a9c", "w2", 60)
    assert not store.renew_lease("b-7f3a9c", "w1", 60)
    row = store.get_batch("b-7f3a9c")
    assert row is not None and row.lease_owner == "w2"
    assert row.lease_expires_at is not None and row.lease_expires_at > datetime.now(UTC)


def test_one_of_many_racing_workers_gets_the_lease(store: Store) -> None:
    new_batch(store)
    won = in_threads(8, lambda i: store.try_acquire_lease("b-7f3a9c", f"w{i}", 60))
    assert sum(won) == 1


def test_a_failed_write_leaves_nothing_half_written(store: Store) -> None:
    new_batch(store)
    records = [(i, make_record("b-7f3a9c", f"a{i}")) for i in range(20)]
    records.insert(10, (10, make_record("b-missing", "orphan")))  # violates the foreign key
    with pytest.raises(IntegrityError):
        store.put_records(records)
    assert store.records("b-7f3a9c") == []
    with pytest.raises(TypeError):
        new_batch(store, "b-bad", plan=make_plan(bench={"not json": object()}))
    assert store.get_batch("b-bad") is None


def test_a_batch_of_a_thousand_runs(store: Store) -> None:
    new_batch(store)
    records = [
        (i, make_record("b-7f3a9c", f"approach-{i:04d}", log_tail="x" * 2000, extra_key=i))
        for i in reversed(range(1000))
    ]
    store.put_records(records)  # one transaction (its time: make bench, bench_store)
    back = store.records("b-7f3a9c")
    assert back == [record for _, record in sorted(records, key=lambda pair: pair[0])]


def test_an_upgrade_checks_runs_sit_beside_the_batchs_own_and_old_runs_keep_theirs(
        url: str) -> None:
    """docs/contracts.md "Stacks": a batch keeps one run per (stack, approach); its own records
    (the run-record format: one baseline) are those of its own stack, the stack an upgrade
    check runs against has its own; a database migrated from 0009 keeps its runs as the
    batch's own."""
    from alembic import command
    from alembic.config import Config

    from jobs.store.database import _MIGRATIONS

    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url)
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0009")
    with engine.begin() as connection:
        connection.execute(text(
            "INSERT INTO batches (id, preset, engine, queue, state, requested_by, plan, "
            "created_at, cancel_requested) VALUES ('b-old', 'eagle3', 'local', 'default', "
            "'running', 'U1', :plan, CURRENT_TIMESTAMP, false)"),
            {"plan": json.dumps(make_plan().to_dict())})
        connection.execute(text(
            "INSERT INTO runs (batch_id, position, approach, role, status, record) VALUES "
            "('b-old', 0, 'baseline', 'baseline', 'ok', :record)"),
            {"record": _record("b-old", "baseline").to_json()})
    engine.dispose()
    with Store(url) as store:
        assert [r.approach for r in store.records("b-old")] == ["baseline"]
        store.put_record(_record("b-old", "baseline", value=120.0), position=0, stack="new")
        store.put_record(_record("b-old", "baseline", value=121.0), position=0, stack="new")
        assert [r.metrics["output_throughput"] for r in store.records("b-old")] == [[100.0]]
        assert [r.metrics["output_throughput"] for r in store.records("b-old", stack="new")] == [
            [121.0]]
        assert store.end("b-old", "done", report={"results": [{
            "approach": "baseline", "verdict": "improved", "delta_pct": 5.0, "value": 105.0}]})
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(text(
                "SELECT stack, verdict FROM runs ORDER BY stack")).all()
    finally:
        engine.dispose()
    assert [tuple(r) for r in rows] == [("", "improved"), ("new", None)]


def _record(batch: str, approach: str, *, value: float = 100.0) -> RunRecord:
    return to_record({"batch": batch, "preset": "eagle3", "approach": approach,
                      "role": "baseline" if approach == "baseline" else "approach",
                      "status": "ok", "metrics": {"output_throughput": [value]}})
