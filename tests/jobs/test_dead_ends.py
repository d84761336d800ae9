"""Known dead ends across batches (docs/contracts.md "Memory across batches"), on SQLite and
PostgreSQL: the real store, execution, rules and verdicts, with an engine that fails the way a GPU
does."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from jobs.batches.execution import execute_batch
from jobs.core.events import NullSink
from jobs.core.memory import config_key, stack_key
from jobs.core.plans import BatchPlan, RunConfig, parse_preset, resolve
from jobs.core.records import RunRecord
from jobs.engines.base import RunContext, now_iso, to_run_record
from jobs.store import Store
from tests.jobs.test_store import postgres_url, url  # noqa: F401 - fixtures: both databases

PRESET = """\
name: mem
description: an approach the GPU cannot run, one that runs out of memory
engine: sglang
reps: 2
baseline:
  server_args: {model-path: /m, tp-size: 8}
approaches:
  - name: symm-mem
    hypothesis: torch symmetric memory
    server_args: {enable-torch-symm-mem: true}
  - name: big-batch
    hypothesis: a bigger batch
    server_args: {max-running-requests: 4096}
  - name: plain
    hypothesis: a change that runs
    server_args: {chunked-prefill-size: 4096}
"""
ARCH = ("RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
        "Rank 0 scheduler is dead")
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB."
STACK = {"gpu": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "gpu_count": 8,
         "compute_capability": "12.0", "interconnect": "PCIe", "driver": "575.57.08",
         "cuda": "12.8", "torch": "2.8.0", "sglang": "0.5.2", "nccl": "2.27.3"}


class GPU:
    """An SGLang host whose symm-mem needs kernels this GPU lacks, big-batch runs out of
    memory, the rest run."""

    name = "sglang"

    def __init__(self, **stack: Any) -> None:
        self.stack = {**STACK, **stack}
        self.started: list[str] = []

    def preflight(self, plan: BatchPlan) -> dict[str, str]:
        return {}

    def fingerprint(self) -> dict[str, Any]:
        return dict(self.stack)

    def run(self, config: RunConfig, ctx: RunContext) -> RunRecord:
        self.started.append(config.approach)
        failure = {"symm-mem": ARCH, "big-batch": OOM}.get(config.approach)
        if failure is not None:
            return to_run_record(config, ctx, status="failed", started_at=now_iso(),
                                 exit_code=1, log_tail=failure)
        return to_run_record(config, ctx, status="ok", started_at=now_iso(), exit_code=0,
                             metrics={"output_throughput": [100.0, 101.0]})


@pytest.fixture
def db(url: str) -> Iterator[Store]:  # noqa: F811 - the imported fixture, requested
    with Store(url) as opened:
        yield opened


def batch(store: Store, engine: GPU, name: str, *, rerun_known: bool = False,
          ) -> dict[str, Any]:
    store.migrate()
    plan = resolve(parse_preset(PRESET, source="mem.yaml", stem="mem"))
    plan = dataclasses.replace(plan, rerun_known=rerun_known)
    store.create_batch(batch_id=name, preset="mem", engine="sglang", queue="default",
                       requested_by="U1", plan=plan)
    return execute_batch(name, store=store, sink=NullSink(), engine=engine)  # type: ignore[arg-type]


def result(report: dict[str, Any], approach: str) -> dict[str, Any]:
    return next(r for r in report["results"] if r["approach"] == approach)


def test_a_known_dead_end_is_not_started_on_the_same_stack(db: Store) -> None:
    first = GPU()
    batch(db, first, "b-first")
    assert "symm-mem" in first.started
    second = GPU()
    report = batch(db, second, "b-second")
    # out-of-memory: tried again; the baseline measured again last (its closing bracket)
    assert second.started == ["baseline", "big-batch", "plain", "baseline"]
    known = result(report, "symm-mem")
    assert known["verdict"] == "failed" and known["cause"] == "arch-unsupported"
    assert known["why"].startswith("known from b-first: ")
    assert known["why"].endswith(  # what it failed of: nothing of the bench
        "; re-opened by a change of its server args or env, or of the stack (GPU, compute "
        "capability, driver, CUDA, torch, NCCL, the engine sglang and its version)")
    [record] = [r for r in db.records("b-second") if r.approach == "symm-mem"]
    [earlier] = [r for r in db.records("b-first") if r.approach == "symm-mem"]
    assert record.status == "failed" and record.extra["known_from"] == "b-first"
    assert (record.exit_code, record.log_tail) == (earlier.exit_code, earlier.log_tail)
    assert record.to_dict()["known_from"] == "b-first"  # a top-level key of the record
    assert result(report, "big-batch")["cause"] == "out-of-memory"
    assert not result(report, "big-batch")["why"].startswith("known from")
    # A third batch still names the batch where it really failed, not the copy.
    third = GPU()
    batch(db, third, "b-third")
    assert "symm-mem" not in third.started
    [again] = [r for r in db.records("b-third") if r.approach == "symm-mem"]
    assert again.extra["known_from"] == "b-first"


@pytest.mark.parametrize("upgrade", [{"driver": "580.65.06"}, {"cuda": "12.9"},
                                     {"torch": "2.9.0"}, {"sglang": "0.5.3"}, {"nccl": "2.28.3"}])
def test_any_stack_upgrade_reopens_it_and_the_report_says_what_failed_before(
    db: Store, upgrade: dict[str, str]
) -> None:
    batch(db, GPU(), "b-first")
    upgraded = GPU(**upgrade)
    report = batch(db, upgraded, "b-upgraded")
    assert "symm-mem" in upgraded.started
    why = result(report, "symm-mem")["why"]
    [(key, new)] = upgrade.items()
    assert "it failed before (arch-unsupported, batch b-first)" in why
    assert f"{key} {STACK[key]} → {new}" in why


def test_rerun_known_starts_it_anyway(db: Store) -> None:
    batch(db, GPU(), "b-first")
    forced = GPU()
    report = batch(db, forced, "b-forced", rerun_known=True)
    assert forced.started == ["baseline", "symm-mem", "big-batch", "plain", "baseline"]
    assert not result(report, "symm-mem")["why"].startswith("known from")


def test_a_dead_end_that_ran_since_on_this_stack_is_no_dead_end(db: Store) -> None:
    batch(db, GPU(), "b-first")

    class Fixed(GPU):  # a fix in the preset's kernels, same versions: it ran with --rerun-known
        def run(self, config: RunConfig, ctx: RunContext) -> RunRecord:
            if config.approach == "symm-mem":
                self.started.append(config.approach)
                return to_run_record(config, ctx, status="ok", started_at=now_iso(),
                                     exit_code=0, metrics={"output_throughput": [99.0, 99.5]})
            return super().run(config, ctx)

    batch(db, Fixed(), "b-fixed", rerun_known=True)
    later = GPU()
    batch(db, later, "b-later")
    assert "symm-mem" in later.started


def test_the_migration_gives_runs_stored_before_it_their_keys(url: str) -> None:  # noqa: F811
    """A store at 0002 with a failed run: after `migrate`, that run is a known dead end."""
    import json
    from pathlib import Path

    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine, text

    from jobs.store.database import _MIGRATIONS

    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url)
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0002")
    plan = resolve(parse_preset(PRESET, source="mem.yaml", stem="mem"))
    record = {"batch": "b-old", "preset": "mem", "approach": "symm-mem", "role": "approach",
              "status": "failed", "server_args": plan.config("symm-mem").server_args, "env": {},
              "exit_code": 1, "log_tail": ARCH, "metrics": {"output_throughput": []},
              "fingerprint": STACK, "started_at": "2026-01-01T00:00:00+00:00",
              "finished_at": "2026-01-01T00:05:00+00:00", "parent": None, "hypothesis": "",
              "change": {"server_args": {}, "env": {}}}
    with engine.begin() as connection:
        connection.execute(text(
            "INSERT INTO batches (id, preset, engine, queue, state, requested_by, plan, "
            "created_at, cancel_requested) VALUES ('b-old', 'mem', 'local', 'default', 'done', "
            "'U1', :plan, CURRENT_TIMESTAMP, false)"), {"plan": json.dumps(plan.to_dict())})
        connection.execute(text(
            "INSERT INTO runs (batch_id, position, approach, role, status, record) VALUES "
            "('b-old', 1, 'symm-mem', 'approach', 'failed', :record)"),
            {"record": json.dumps(record)})
    engine.dispose()
    with Store(url) as db:
        engine_now = GPU()
        batch(db, engine_now, "b-new")
        assert "symm-mem" not in engine_now.started
        [known] = [r for r in db.records("b-new") if r.approach == "symm-mem"]
        assert known.extra["known_from"] == "b-old"


OFFLINE_BENCH = ("[2026-12-02 10:00:01] INFO: The server is fired up and ready to roll!\n"
                 "specbench: bench_serving (warm-up) exited 1:\n"
                 "huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying "
                 "to locate the file on the Hub and we cannot find the requested files in the "
                 "local cache.")


def test_the_migration_keys_earlier_bench_failures_by_their_bench_settings(
    url: str,  # noqa: F811
) -> None:
    """A store from before `failed_in` (at 0008) with a run whose benchmark failed (its dataset
    could not be downloaded) and one whose server failed: after `migrate`, a batch with other
    bench settings runs the first and still knows the second."""
    import json
    from pathlib import Path

    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine, text

    from jobs.store.database import _MIGRATIONS

    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url)
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0008")
    plan = dataclasses.replace(resolve(parse_preset(PRESET, source="mem.yaml", stem="mem")),
                               bench={"dataset-name": "random", "num-prompts": 2})
    with engine.begin() as connection:
        connection.execute(text(
            "INSERT INTO batches (id, preset, engine, queue, state, requested_by, plan, "
            "created_at, cancel_requested) VALUES ('b-old', 'mem', 'sglang', 'default', 'done', "
            "'U1', :plan, CURRENT_TIMESTAMP, false)"), {"plan": json.dumps(plan.to_dict())})
        for position, (approach, tail) in enumerate(
                [("plain", OFFLINE_BENCH), ("symm-mem", ARCH)], start=1):
            old = to_run_record(plan.config(approach), RunContext(
                batch_id="b-old", plan=plan, log_path=Path("x.log"), fingerprint=STACK,
                on_phase=lambda name, details: None, should_stop=lambda: False),
                status="failed", started_at="2026-01-01T00:00:00+00:00", exit_code=1,
                log_tail=tail)
            connection.execute(text(
                "INSERT INTO runs (batch_id, position, approach, role, status, record, "
                "config_key, stack_key, finished_at) VALUES ('b-old', :position, :approach, "
                "'approach', 'failed', :record, :config, :stack, CURRENT_TIMESTAMP)"),
                {"position": position, "approach": approach, "record": old.to_json(),
                 "config": config_key(old.server_args, old.env),
                 "stack": stack_key(STACK, engine="sglang")})
    engine.dispose()
    with Store(url) as db:
        later = GPU()
        report = batch(db, later, "b-new")  # the preset's own bench: no dataset to download
        assert "plain" in later.started
        assert not result(report, "plain")["why"].startswith("known from")
        assert "symm-mem" not in later.started
        assert result(report, "symm-mem")["why"].startswith("known from b-old: ")
