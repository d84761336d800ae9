"""`compare`: the pure comparison (jobs.core.digest) and the command over a real store, on
SQLite and on PostgreSQL; the seed session against a recorded batch after a driver upgrade."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot import views
from jobs.commands.analyze import AnalyzeArgs, analyze
from jobs.commands.compare import CompareArgs, compare
from jobs.commands.context import Caller, Context
from jobs.core.digest import Side, compare_batches
from jobs.core.plans import BatchPlan, RunConfig
from jobs.core.records import RunRecord, parse_lines
from jobs.errors import UserError
from jobs.store import Store
from jobs.store.comparisons import latest_reported
from tests.conftest import FINGERPRINT, SEED, make_plan, need_shared
from tests.jobs.test_store import postgres_url, url  # noqa: F401 - the parametrised backends

UPGRADED = Path(__file__).resolve().parent / "fixtures" / "seed-session-upgraded.jsonl"
MOVED = {"cuda-graph-max-bs-128", "eagle3", "eagle3-custom-allreduce"}
T0 = datetime(2026, 11, 30, 14, 0, tzinfo=UTC)


@pytest.fixture
def store(url: str) -> Any:  # noqa: F811 - `url` is the imported fixture
    with Store(url) as opened:
        yield opened


def _records(path: Path) -> list[RunRecord]:
    return list(parse_lines(path.read_text(encoding="utf-8").splitlines(), source=str(path)))


def plan_of(records: list[RunRecord], **fields: Any) -> BatchPlan:
    configs = tuple(
        RunConfig(approach=r.approach, role=r.role, parent=r.parent, hypothesis=r.hypothesis,
                  change=r.change, server_args=dict(r.server_args), env=dict(r.env))
        for r in records
    )
    return make_plan(configs=configs, **fields)


def load(store: Store, path: Path, *, at: datetime) -> str:
    """A recorded session stored as an ended batch: plan, records, report."""
    need_shared(path)
    records = _records(path)
    batch = records[0].batch
    store.create_batch(batch_id=batch, preset=records[0].preset, engine="sglang",
                       queue="default", requested_by="U123", plan=plan_of(records),
                       created_at=at)
    store.put_records(list(enumerate(records)))
    store.end(batch, "done", report=analyze(AnalyzeArgs(runs=path)))
    return batch


def _ctx(store: Store) -> Context:
    return Context(store=store, caller=Caller(user="U123", surface="cli"))


def _side(batch: str, records: list[RunRecord], plan: BatchPlan | None = None) -> Side:
    return Side(batch=batch, preset="eagle3", when="2026-12-01 10:00", state="done",
                plan=plan or plan_of(records), records=tuple(records), report={"results": []})


def _rec(approach: str, samples: list[float], *, batch: str = "b-a", **fields: Any) -> RunRecord:
    role = "baseline" if approach == "baseline" else "approach"
    fields.setdefault("fingerprint", dict(FINGERPRINT))
    return RunRecord(batch=batch, preset="eagle3", approach=approach, role=role, status="ok",
                     metrics={"output_throughput": samples}, **fields)


# --- the pure comparison ---------------------------------------------------------------------

def test_a_change_counts_only_beyond_both_ranges_and_the_minimum_effect() -> None:
    a = [_rec("baseline", [80, 81, 82]), _rec("far", [80, 81, 82]), _rec("overlap", [80, 81, 82]),
         _rec("small", [80.0, 80.1, 80.2])]
    b = [_rec("baseline", [80, 81, 82], batch="b-b"), _rec("far", [90, 91, 92], batch="b-b"),
         _rec("overlap", [78, 85, 86], batch="b-b"), _rec("small", [81, 81.1, 81.2], batch="b-b")]
    data = compare_batches(_side("b-a", a), _side("b-b", b))
    rows = {r["approach"]: r for r in data["approaches"]}
    assert data["moved"] == ["far"]
    assert rows["far"]["change_pct"] == pytest.approx(12.3) and rows["far"]["direction"] == "better"
    # +4.9% but the ranges overlap; +1.2% with disjoint ranges is under the 2% minimum.
    assert not rows["overlap"]["beyond_noise"] and not rows["small"]["beyond_noise"]
    assert rows["small"]["change_pct"] == pytest.approx(1.2)
    assert data["fingerprint"] == [] and data["knobs"] == [] and data["warnings"] == []


def test_lower_is_better_names_a_drop_better_and_failures_have_no_change() -> None:
    a = [_rec("baseline", [10, 10.1]), _rec("x", [10, 10.1]), _rec("broken", [10, 10.2])]
    b = [_rec("baseline", [10, 10.1], batch="b-b"), _rec("x", [8, 8.1], batch="b-b"),
         dataclasses.replace(_rec("broken", [], batch="b-b"), status="failed")]
    plan = plan_of(a, lower_is_better=True)
    data = compare_batches(_side("b-a", a, plan), _side("b-b", b, plan_of(b, lower_is_better=True)))
    rows = {r["approach"]: r for r in data["approaches"]}
    assert rows["x"]["change_pct"] == pytest.approx(-19.9) and rows["x"]["direction"] == "better"
    assert rows["broken"]["change_pct"] is None and not rows["broken"]["beyond_noise"]
    assert rows["broken"]["b"]["value"] is None and rows["broken"]["b"]["status"] == "failed"


def test_knobs_overrides_fingerprint_and_approaches_of_one_side_only() -> None:
    a = [_rec("baseline", [80, 81]), _rec("gone", [80, 81]),
         _rec("tuned", [80, 81], server_args={"tp-size": 8}, env={"HF_TOKEN": "s3cret"})]
    newer = {**FINGERPRINT, "driver": "580.65.06", "nccl": "2.28.0"}
    b = [_rec("baseline", [80, 81], batch="b-b", fingerprint=newer),
         _rec("tuned", [80, 81], batch="b-b", server_args={"tp-size": 4},
              env={"HF_TOKEN": "other", "NCCL_ALGO": "Tree"}),
         _rec("new", [80, 81], batch="b-b")]
    data = compare_batches(_side("b-a", a, plan_of(a, overrides={"reps": 3})),
                           _side("b-b", b, plan_of(b, overrides={"reps": 5})))
    assert [r["approach"] for r in data["approaches"]] == ["baseline", "tuned", "new", "gone"]
    rows = {r["approach"]: r for r in data["approaches"]}
    assert not rows["new"]["a"]["present"] and not rows["gone"]["b"]["present"]
    assert data["fingerprint"] == [{"key": "driver", "a": "575.57.08", "b": "580.65.06"},
                                   {"key": "nccl", "a": "2.27.3", "b": "2.28.0"}]
    assert {(k["approach"], k["kind"], k["knob"], k["a"], k["b"]) for k in data["knobs"]} == {
        ("tuned", "server_args", "tp-size", 8, 4),
        ("tuned", "env", "HF_TOKEN", "••••", "••••"),
        ("tuned", "env", "NCCL_ALGO", None, "Tree"),
    }
    assert data["overrides"] == [{"knob": "reps", "a": 3, "b": 5}]
    text = views.compared(data)
    assert "s3cret" not in text and "tuned tp-size 8 → 4" in text
    assert "Stack: driver 575.57.08 → 580.65.06, nccl 2.27.3 → 2.28.0" in text


def test_a_different_metric_is_refused_and_a_different_preset_warned() -> None:
    a = [_rec("baseline", [80, 81])]
    with pytest.raises(UserError, match="measure different things"):
        compare_batches(_side("b-a", a), _side("b-b", a, plan_of(a, metric="ttft_ms")))
    other = dataclasses.replace(_side("b-b", a), preset="eagle3-tune")
    assert compare_batches(_side("b-a", a), other)["warnings"] == [
        "different presets (eagle3 vs eagle3-tune): approaches are matched by name"]


# --- the command over a real store -----------------------------------------------------------

def test_the_seed_against_an_upgrade_names_the_driver_and_what_moved(store: Store) -> None:
    old = load(store, SEED, at=T0)
    new = load(store, UPGRADED, at=T0 + timedelta(days=2))
    data = compare(_ctx(store))  # the default: the latest two of the preset
    assert (data["a"]["batch"], data["b"]["batch"]) == (old, new)
    assert set(data["moved"]) == MOVED
    assert data["fingerprint"] == [{"key": "driver", "a": "575.57.08", "b": "580.65.06"}]
    text = views.compared(data)
    assert "driver 575.57.08 → 580.65.06" in text
    line = next(x for x in text.splitlines() if x.startswith("Moved beyond noise: "))
    assert set(re.findall(r"([\w.-]+) \([+-]", line)) == MOVED
    # two batches of one stack: no spread to judge against yet, so each move says it is
    # unconfirmed (docs/contracts.md "Noise, measured")
    assert {x.split()[0] for x in text.splitlines()
            if " beyond noise, unconfirmed: 0 earlier batches" in x} == MOVED
    rows = {r["approach"]: r for r in data["approaches"]}
    assert rows["eagle3-custom-allreduce"]["direction"] == "worse"
    assert rows["eagle3-nccl-tree"]["a"]["verdict"] == rows["eagle3-nccl-tree"]["b"]["verdict"]
    assert compare(_ctx(store), CompareArgs(a=new)) == data
    assert compare(_ctx(store), CompareArgs(a=old, b=new)) == data


def test_default_pairs_the_latest_batch_with_its_presets_last_ended_one(store: Store) -> None:
    records = _records(need_shared(SEED))
    report = {"results": [], "batch": "x"}
    for i, (batch, preset, ended) in enumerate([
        ("b-1", "eagle3", True), ("b-2", "other", True), ("b-3", "eagle3", False),
        ("b-4", "eagle3", True), ("b-5", "other", False),
    ]):
        store.create_batch(batch_id=batch, preset=preset, engine="local", queue="default",
                           requested_by="U1", plan=plan_of(records),
                           created_at=T0 + timedelta(hours=i))
        store.put_records([(n, dataclasses.replace(r, batch=batch))
                           for n, r in enumerate(records)])
        if ended:
            store.end(batch, "done", report=report)
    data = compare(_ctx(store))
    assert (data["a"]["batch"], data["b"]["batch"]) == ("b-1", "b-4")
    row = latest_reported(store, preset="other")
    assert row is not None and row.id == "b-2"
    with pytest.raises(UserError, match="no finished batch of other before b-2"):
        compare(_ctx(store), CompareArgs(a="b-2"))
    # A batch named without a report (still running) is compared from its records so far.
    assert compare(_ctx(store), CompareArgs(a="b-3"))["a"]["batch"] == "b-1"


def test_bad_input_is_one_line(store: Store) -> None:
    with pytest.raises(UserError, match="no finished batch stored yet"):
        compare(_ctx(store))
    only = load(store, SEED, at=T0)
    with pytest.raises(UserError, match="no finished batch of eagle3 before b-seed-5254"):
        compare(_ctx(store))
    with pytest.raises(UserError, match=r"unknown batch 'b-seed-525' \(did you mean"):
        compare(_ctx(store), CompareArgs(a="b-seed-525", b=only))
    with pytest.raises(UserError, match="two different batches"):
        compare(_ctx(store), CompareArgs(a=only, b=only))


def test_the_mixin_serves_the_same_rows(url: str) -> None:  # noqa: F811 - the imported fixture
    from jobs.store.comparisons import Comparisons

    class Mixed(Store, Comparisons):
        pass

    with Mixed(url) as mixed:
        old = load(mixed, SEED, at=T0)
        new = load(mixed, UPGRADED, at=T0 + timedelta(days=2))
        newest = mixed.latest_reported()
        assert newest is not None and newest.id == new
        earlier = mixed.latest_reported(preset="eagle3", before=newest)
        assert earlier is not None and earlier.id == old
        assert mixed.recent_batch_ids() == [new, old]
