"""Issue 3's store figure: write + read of a 1,000-run batch on SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import uuid

import sqlalchemy as sa

from jobs.core.records import RunRecord
from jobs.store import Store
from tests.conftest import make_plan

PG_ADMIN = os.environ.get(
    "SPECBENCH_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


def _records(batch: str, n: int) -> list[tuple[int, RunRecord]]:
    tail = "\n".join(f"[2026-12-02 10:00:{i % 60:02d}] INFO: line {i}" for i in range(40))
    return [
        (i, RunRecord(
            batch=batch, preset="bench", approach=f"approach-{i:04d}",
            role="baseline" if i == 0 else "approach", status="ok", log_tail=tail,
            server_args={"model-path": "/m", "tp-size": 8, "knob": i},
            metrics={"output_throughput": [80.0 + i % 7, 81.0, 82.0], "accept_length": None},
        ))
        for i in range(n)
    ]


def _measure(store: Store, runs: int = 5) -> tuple[float, float]:
    writes, reads = [], []
    for _ in range(runs):
        batch = f"b-{uuid.uuid4().hex[:8]}"
        store.create_batch(batch_id=batch, preset="bench", engine="local", queue="default",
                           requested_by="bench", plan=make_plan())
        records = _records(batch, 1000)
        began = time.perf_counter()
        store.put_records(records)
        writes.append(time.perf_counter() - began)
        began = time.perf_counter()
        assert len(store.records(batch)) == 1000
        reads.append(time.perf_counter() - began)
    return statistics.median(writes) * 1000, statistics.median(reads) * 1000


def run() -> dict[str, str]:
    figures: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as folder:
        store = Store(f"sqlite:///{folder}/bench.db")
        write, read = _measure(store)
        store.close()
        figures["store, 1,000-run batch, SQLite (median of 5)"] = (
            f"write {write:.0f} ms, read {read:.0f} ms"
        )
    name = f"specbench_bench_{os.getpid()}"
    admin = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except sa.exc.OperationalError as exc:
        figures["store, 1,000-run batch, PostgreSQL"] = f"not measured: {str(exc).splitlines()[0]}"
        return figures
    try:
        url = sa.engine.make_url(PG_ADMIN).set(database=name).render_as_string(hide_password=False)
        store = Store(url)
        write, read = _measure(store)
        store.close()
        figures["store, 1,000-run batch, PostgreSQL (median of 5)"] = (
            f"write {write:.0f} ms, read {read:.0f} ms"
        )
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    return figures
