"""The digest's memory across batches, read through the store's digest queries on SQLite and
PostgreSQL: regressions with their stack change, known dead ends skipped and the GPU-hours that
saved, GPU-hours per preset, and dead ends an upgrade re-opened."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from sqlalchemy import select, text, update

from jobs.commands.context import Caller, Context
from jobs.commands.digest import digest as digest_command
from jobs.core.digest import build_digest
from jobs.core.messages import render_blocks, render_text
from jobs.core.plans import BatchPlan
from jobs.core.records import RunRecord
from jobs.store import Store
from jobs.store.digest_queries import digest_inputs
from jobs.store.schema import Run
from tests.conftest import BASE_ARGS, FINGERPRINT, make_plan, make_record
from tests.jobs.test_digest import CHUNK_0, sweep_plan
from tests.jobs.test_store import postgres_url, url  # noqa: F401 - fixtures: both databases

NOW = dt.datetime(2026, 12, 7, 9, 0, tzinfo=dt.UTC)
UPGRADED = {**FINGERPRINT, "driver": "590.10"}
ARCH = "RuntimeError: CUDA error: no kernel image is available for execution on the device"


@pytest.fixture
def store(url: str) -> Iterator[Store]:  # noqa: F811 - `url` is the parametrised fixture
    with Store(url) as opened:
        yield opened


def add_batch(store: Store, batch: str, *, days_ago: float, runs: Sequence[RunRecord],
              preset: str = "eagle3", report: dict[str, Any] | None = None,
              plan: BatchPlan | None = None) -> None:
    store.create_batch(batch_id=batch, preset=preset, engine="sglang", queue="default",
                       requested_by="U1", plan=plan or make_plan(preset=preset),
                       created_at=NOW - dt.timedelta(days=days_ago))
    store.put_records([(i, r) for i, r in enumerate(runs)])
    store.end(batch, "done", report=report)


def run(batch: str, approach: str, samples: Sequence[float] | None = (100.0, 101.0, 102.0), *,
        preset: str = "eagle3", minutes: float = 10.0, **kw: Any) -> RunRecord:
    began = NOW - dt.timedelta(days=30)
    extra = {"started_at": began.isoformat(),
             "finished_at": (began + dt.timedelta(minutes=minutes)).isoformat(),
             **kw.pop("extra", {})}
    return make_record(approach, samples=samples, batch=batch, preset=preset, extra=extra, **kw)


def digest_of(store: Store, days: float = 7) -> dict[str, Any]:
    return digest_command(Context(store=store, caller=Caller("U1")), days=days, chart=False,
                          now=NOW).digest


def test_a_baseline_on_another_stack_is_no_value_to_compare(store: Store) -> None:
    # absolute values are compared only for one configuration on one host and stack
    add_batch(store, "b-1", days_ago=10, runs=[run("b-1", "baseline", [100, 101, 102])])
    add_batch(store, "b-2", days_ago=3, runs=[
        run("b-2", "baseline", [80, 81, 82], fingerprint=UPGRADED)])
    assert digest_of(store)["regressions"] == []


def test_the_same_baseline_slower_on_the_same_stack_is_a_regression(store: Store) -> None:
    add_batch(store, "b-1", days_ago=10, runs=[run("b-1", "baseline", [100, 101, 102])])
    add_batch(store, "b-2", days_ago=3, runs=[run("b-2", "baseline", [80, 81, 82])])
    digest = digest_of(store)
    (moved,) = digest["regressions"]
    assert (moved["preset"], moved["what"], moved["from"]["batch"], moved["to"]["batch"]) == (
        "eagle3", "baseline", "b-1", "b-2")
    assert moved["delta_pct"] == pytest.approx(-19.8)
    assert moved["stack"] == [] and moved["overrides"] == []
    text = render_text("digest", digest=digest)
    assert ("▼ eagle3 baseline: 101 tok/s → 81 tok/s output_throughput (-19.8%), b-1 → b-2; "
            "the same configuration on the same host and stack") in text


def test_an_effect_lost_after_a_driver_upgrade_names_the_driver(store: Store) -> None:
    add_batch(store, "b-1", days_ago=10, runs=[
        run("b-1", "baseline", [100, 101]), run("b-1", "cg-128", [120, 121])],
        report=judged_report("b-1", ("cg-128", "improved", 19.4, 120.5)))
    add_batch(store, "b-2", days_ago=3, runs=[
        run("b-2", "baseline", [80, 81], fingerprint=UPGRADED),
        run("b-2", "cg-128", [80, 81], fingerprint=UPGRADED)],
        report=judged_report("b-2", ("cg-128", "unchanged", 0.0, 80.5)))
    digest = digest_of(store)
    (moved,) = digest["regressions"]  # the baselines ran on different stacks: no value compared
    assert (moved["what"], moved["approach"], moved["change_pp"]) == ("best", "cg-128", -19.4)
    assert (moved["from"]["verdict"], moved["to"]["verdict"]) == ("improved", "unchanged")
    assert moved["stack"] == [{"key": "driver", "from": "575.57.08", "to": "590.10"}]
    text = render_text("digest", digest=digest)
    assert ("▼ eagle3 best: cg-128 +19.4% (improved) → +0.0% (unchanged) output_throughput, "
            "each against its own batch's baseline (-19.4 pp), b-1 → b-2; "
            "driver 575.57.08 → 590.10") in text


def test_a_move_within_noise_is_no_regression(store: Store) -> None:
    add_batch(store, "b-1", days_ago=5, runs=[run("b-1", "baseline", [100, 104, 110])])
    # -3.8%, beyond the 2% minimum effect, but the ranges overlap: noise
    add_batch(store, "b-2", days_ago=4, runs=[run("b-2", "baseline", [95, 100, 103])])
    # -1%: ranges apart, but below the minimum effect
    add_batch(store, "b-3", days_ago=3, runs=[run("b-3", "baseline", [98.9, 99, 99.1])])
    digest = digest_of(store)
    assert digest["regressions"] == []
    assert "one host and stack):\n  none" in render_text("digest", digest=digest)


def judged_report(batch: str, *results: tuple[str, str, float, float]) -> dict[str, Any]:
    """A stored report: (approach, verdict, delta_pct, value) per result."""
    return {"batch": batch, "preset": "eagle3", "metric": "output_throughput",
            "baseline": {"approach": "baseline", "value": 100.0, "status": "ok"},
            "results": [{"approach": a, "verdict": v, "delta_pct": d, "value": x,
                         "cause": None, "why": ""} for a, v, d, x in results],
            "next_steps": []}


def test_a_regression_without_a_stack_change_says_so_and_names_the_override(
    store: Store,
) -> None:
    add_batch(store, "b-1", days_ago=2, runs=[
        run("b-1", "baseline", [100, 101]), run("b-1", "cg-128", [120, 121])],
        report=judged_report("b-1", ("cg-128", "improved", 19.4, 120.5)))
    tuned = {**BASE_ARGS, "mem-fraction-static": 0.9}
    add_batch(store, "b-2", days_ago=1, runs=[
        run("b-2", "baseline", [60, 61], server_args=tuned),
        run("b-2", "cg-128", [56, 57], server_args=tuned)],
        report=judged_report("b-2", ("cg-128", "regressed", -6.6, 56.5)),
        plan=make_plan(overrides={"mem-fraction-static": 0.9}))
    digest = digest_of(store)
    # the baselines ran different configurations: their values (100 → 60) are not compared
    (moved,) = digest["regressions"]
    assert (moved["what"], moved["to"]["approach"], moved["stack"]) == ("best", "cg-128", [])
    assert moved["overrides"] == [{"knob": "mem-fraction-static", "from": None, "to": 0.9}]
    text = render_text("digest", digest=digest)
    assert "no stack change; overrides differ: mem-fraction-static unset → 0.9" in text
    assert "60.5 tok/s" not in text


def test_an_effect_that_stays_judged_improved_is_no_regression(store: Store) -> None:
    add_batch(store, "b-1", days_ago=2, runs=[run("b-1", "baseline", [100, 101])],
              report=judged_report("b-1", ("cg-128", "improved", 19.4, 120.5)))
    add_batch(store, "b-2", days_ago=1, runs=[run("b-2", "baseline", [100, 101])],
              report=judged_report("b-2", ("cg-128", "improved", 9.5, 110.5)))
    assert digest_of(store)["regressions"] == []


def test_a_confounded_run_is_no_best_to_regress_from(store: Store) -> None:
    add_batch(store, "b-1", days_ago=2, runs=[
        run("b-1", "baseline", [100, 101]), run("b-1", "tp", [300, 301])],
        report=judged_report("b-1", ("tp", "inconclusive", 198.5, 300.5)))
    add_batch(store, "b-2", days_ago=1, runs=[
        run("b-2", "baseline", [100, 101]), run("b-2", "cg-128", [110, 111])],
        report=judged_report("b-2", ("cg-128", "improved", 9.5, 110.5)))
    assert digest_of(store)["regressions"] == []


def test_gpu_hours_per_preset(store: Store) -> None:
    add_batch(store, "b-1", days_ago=2, runs=[
        run("b-1", "baseline", minutes=30), run("b-1", "eagle3", minutes=15)])
    add_batch(store, "b-2", days_ago=1, preset="demo", runs=[
        run("b-2", "baseline", preset="demo", minutes=60,
            fingerprint={**FINGERPRINT, "gpu_count": 1}),
        run("b-2", "eagle3", preset="demo", status="skipped", samples=[],
            extra={"started_at": None, "finished_at": None})])
    add_batch(store, "b-old", days_ago=20, runs=[run("b-old", "baseline", minutes=600)])
    assert digest_of(store)["hours"] == [
        {"preset": "demo", "unit": "GPU-hours", "hours": 1.0, "runs": 1},
        {"preset": "eagle3", "unit": "GPU-hours", "hours": 6.0, "runs": 2},  # 45 min of 8 GPUs
    ]


def test_a_cpu_host_spends_cpu_hours(store: Store) -> None:
    cpu = {"gpu": "none (CPU: AMD EPYC 9654)", "gpu_count": 0, "cpu": "AMD EPYC 9654"}
    add_batch(store, "c-1", days_ago=1, preset="cpu-demo", runs=[
        run("c-1", "baseline", preset="cpu-demo", minutes=30, fingerprint=cpu)])
    digest = digest_of(store)
    assert digest["hours"] == [
        {"preset": "cpu-demo", "unit": "CPU-hours", "hours": 0.5, "runs": 1}]
    text = render_text("digest", digest=digest)
    assert "cpu-demo: 0.50 CPU-hours over 1 run" in text and "GPU-hours" not in text.split(
        "Hours spent per preset")[1].split("\n", 1)[1]


def test_a_known_dead_end_counts_as_skipped_with_the_gpu_hours_it_saved(store: Store) -> None:
    add_batch(store, "b-1", days_ago=20, runs=[
        run("b-1", "baseline"),
        run("b-1", "symm", samples=[], status="failed", log_tail=ARCH, minutes=7.5)])
    known = run("b-2", "symm", samples=[], status="failed", log_tail=ARCH,
                extra={"known_from": "b-1", "started_at": None, "finished_at": None})
    assert (getattr(known, "known_from", None) or known.extra.get("known_from")) == "b-1"
    add_batch(store, "b-2", days_ago=1, runs=[run("b-2", "baseline", minutes=30), known])
    digest = digest_of(store)
    assert digest["dead_ends_skipped"] == {
        "count": 1, "saved": [{"unit": "GPU-hours", "hours": 1.0}], "runs": [
            {"batch": "b-2", "preset": "eagle3", "approach": "symm", "known_from": "b-1",
             "hours": 1.0, "unit": "GPU-hours"}]}  # 7.5 minutes of 8 GPUs
    # it started nothing: only the baseline's 30 minutes on 8 GPUs were spent
    assert digest["hours"] == [{"preset": "eagle3", "unit": "GPU-hours", "hours": 4.0,
                                "runs": 1}]
    assert digest["reopened"] == []  # same stack: still a dead end, not worth re-running
    text = render_text("digest", digest=digest)
    assert "Known dead ends skipped: 1, 1.00 GPU-hours saved" in text
    assert "eagle3/symm in b-2 (known from b-1): 1.00 GPU-hours saved" in text


def test_a_dead_end_on_an_old_stack_is_worth_re_running_after_an_upgrade(store: Store) -> None:
    add_batch(store, "b-1", days_ago=40, runs=[
        run("b-1", "baseline"),
        run("b-1", "symm", samples=[], status="failed", log_tail=ARCH),
        run("b-1", "oom", samples=[], status="failed",
            log_tail="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")])
    add_batch(store, "b-2", days_ago=2, runs=[run("b-2", "baseline", fingerprint=UPGRADED)])
    (reopened,) = digest_of(store)["reopened"]
    assert (reopened["approach"], reopened["batch"], reopened["cause"]) == (
        "symm", "b-1", "arch-unsupported")
    assert reopened["stack"] == [{"key": "driver", "from": "575.57.08", "to": "590.10"}]
    assert reopened["newer_batch"] == "b-2"
    # once re-run on the new stack, its latest record is no dead end on an old stack any more
    add_batch(store, "b-3", days_ago=1, runs=[
        run("b-3", "baseline", fingerprint=UPGRADED),
        run("b-3", "symm", fingerprint=UPGRADED)])
    digest = digest_of(store)
    assert digest["reopened"] == []
    payload = render_blocks("digest", fallback="x", digest=digest)
    assert len(payload["blocks"]) <= 50


def test_the_store_queries_give_what_the_whole_history_gives(store: Store) -> None:
    add_batch(store, "b-0", days_ago=60, runs=[run("b-0", "baseline", [90, 91])])
    add_batch(store, "b-1", days_ago=20, runs=[
        run("b-1", "baseline", [100, 101]),
        run("b-1", "symm", samples=[], status="failed", log_tail=ARCH)])
    add_batch(store, "b-2", days_ago=3, runs=[
        run("b-2", "baseline", [80, 81], fingerprint=UPGRADED),
        run("b-2", "cg", [85, 86], fingerprint={**UPGRADED, "gpu": "H200", "gpu_count": 1})])
    steps = [{"rank": 1, "kind": "retry", "approach": "x", "action": "a", "why": "w",
              "effort": "low"}]
    add_batch(store, "d-1", days_ago=90, preset="demo", runs=[
        run("d-1", "baseline", [5, 5], preset="demo")],
        report={"batch": "d-1", "preset": "demo", "results": [], "next_steps": steps})
    # judged history before the window: a confounded fastest run, a sweep's unconfirmed point,
    # and the judged best (cg-64) the window's "previous" must be
    add_batch(store, "j-1", days_ago=40, runs=[
        run("j-1", "baseline", [50, 51]), run("j-1", "cg-64", [60, 61]),
        run("j-1", "tp", [300, 301])],
        report=judged_report("j-1", ("cg-64", "improved", 19.6, 60.5),
                             ("tp", "inconclusive", 490.0, 300.5), ("cg-32", "failed", 0.0, 0.0)))
    add_batch(store, "j-2", days_ago=30, runs=[
        run("j-2", "baseline", [100, 101]), run("j-2", CHUNK_0, [150, 151])],
        plan=sweep_plan(),
        report={**judged_report("j-2", (CHUNK_0, "improved", 49.5, 150.5)),
                "sweep": {"name": "c"}})
    add_batch(store, "j-3", days_ago=29, runs=[
        run("j-3", "baseline", [100, 101]), run("j-3", CHUNK_0, [103, 104])],
        report=judged_report("j-3", (CHUNK_0, "unchanged", 1.0, 103.5)))
    add_batch(store, "j-4", days_ago=2, runs=[
        run("j-4", "baseline", [100, 101]), run("j-4", "eagle3", [110, 111])],
        report=judged_report("j-4", ("eagle3", "improved", 9.9, 110.5)))
    since = NOW - dt.timedelta(days=7)
    rows, records, memory = digest_inputs(store, since=since, now=NOW)
    assert {r.id for r in rows} >= {"b-1", "b-2", "d-1", "j-4"}  # window, predecessors, reports
    (previous,) = memory.earlier
    assert (previous.approach, previous.batch, previous.delta_pct) == ("cg-64", "j-1", 19.6)
    full = store.list_batches()
    everything = {row.id: store.records(row.id) for row in full}
    assert build_digest(rows, records, now=NOW, days=7, memory=memory) == build_digest(
        full, everything, now=NOW, days=7)
    (best,) = build_digest(rows, records, now=NOW, days=7, memory=memory)["best"]
    assert (best["approach"], best["previous"]["approach"], best["change_pp"]) == (
        "cg-64", "cg-64", 0.0)  # j-4's +9.9% is no better: nothing better judged this period
    assert "nothing better judged this period" in render_text(
        "digest", digest=build_digest(rows, records, now=NOW, days=7, memory=memory))


def test_migration_0006_judges_the_stored_runs_and_names_cpu_hosts(store: Store) -> None:
    cpu = {"gpu": "none (CPU: AMD EPYC 9654)", "gpu_count": 0, "cpu": "AMD EPYC 9654"}
    add_batch(store, "c-1", days_ago=1, runs=[
        run("c-1", "baseline", fingerprint=cpu), run("c-1", "gpu", fingerprint=FINGERPRINT),
        run("c-1", "tp", fingerprint=FINGERPRINT)],
        report=judged_report("c-1", ("gpu", "improved", 5.0, 101.0),
                             ("tp", "inconclusive", 90.0, 101.0)))
    _downgrade(store, "0009")  # 0011's runs keyed by stack undone by its own downgrade
    with store._write() as session:  # as 0005 left them: no judged columns, "0x none"
        session.execute(update(Run).where(Run.approach == "baseline")
                        .values(hardware="0x none (CPU: AMD EPYC 9654)"))
        session.execute(text("ALTER TABLE runs DROP COLUMN verdict"))
        session.execute(text("ALTER TABLE runs DROP COLUMN judged_delta"))
        session.execute(text("DROP TABLE slack_parts"))  # 0007's, made again by migrate
        session.execute(text("ALTER TABLE batches DROP COLUMN summary_claim_owner"))
        session.execute(text("ALTER TABLE runs DROP COLUMN bench_key"))  # 0009's
        session.execute(text("UPDATE alembic_version SET version_num = '0005'"))
    store.migrate()
    with store._read() as session:
        named = {a: (h, v, d) for a, h, v, d in session.execute(
            select(Run.approach, Run.hardware, Run.verdict, Run.judged_delta)).all()}
    gpu = "8x NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert named == {"baseline": ("CPU (AMD EPYC 9654)", None, None),
                     "gpu": (gpu, "improved", 5.0), "tp": (gpu, "inconclusive", None)}


def _downgrade(store: Store, revision: str) -> None:
    """The store's schema taken back to `revision` by the migrations' own downgrades."""
    from alembic import command
    from alembic.config import Config

    from jobs.store.database import _MIGRATIONS

    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    with store._engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)
