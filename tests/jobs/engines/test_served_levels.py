"""Load levels in the served engines (docs/contracts.md "Load levels and service-level objectives"),
on the SGLang and vLLM stand-ins: one server per configuration whatever the number of levels, every
level in the record, and the levels a killed run finished taken from its checkpoint."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jobs.core.plans import BatchPlan
from jobs.engines.levels_run import checkpoint_path
from jobs.engines.sglang.engine import SGLangEngine
from jobs.engines.vllm.engine import VLLMEngine
from tests.standin.harness import Standin, make_standin
from tests.standin.vllm_harness import make_vllm_standin

LOADS = {"max-concurrency": [1, 4, 16]}
SLO = {"p99_ttft_ms": 5000.0, "median_tpot_ms": 500.0}
EAGLE3 = {"speculative-algorithm": "EAGLE3", "speculative-draft-model-path": "/models/d"}
Phases = list[tuple[str, dict[str, Any]]]


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Standin:
    return make_standin(tmp_path, monkeypatch)


def with_loads(plan: BatchPlan, *, warmup: bool = True, reps: int = 2,
               loads: dict[str, list[int]] | None = None) -> BatchPlan:
    bench = {k: v for k, v in plan.bench.items() if k != "max-concurrency"}
    return dataclasses.replace(plan, bench={**bench, "num-prompts": 16}, warmup=warmup,
                               reps=reps, loads=loads or LOADS, slo=dict(SLO))


def medians(record_level: dict[str, Any], key: str) -> float:
    values = sorted(record_level["metrics"][key])
    return float(values[len(values) // 2])


def test_sglang_one_server_every_level_in_order_with_slo_keys(standin: Standin) -> None:
    config = standin.config("baseline", role="baseline")
    plan = with_loads(standin.plan(config))
    phases: Phases = []
    record = SGLangEngine().run(config, standin.ctx(plan, "baseline", phases=phases))
    assert record.status == "ok", record.log_tail
    assert len(standin.notes("server")) == 1  # once, whatever the number of levels
    assert len(standin.notes("bench")) == 3 * (1 + 2)  # a warm-up and 2 repetitions a level
    levels = record.to_dict()["by_load"]
    assert [e["load"] for e in levels] == [{"max-concurrency": n} for n in (1, 4, 16)]
    assert all(e["status"] == "ok" and len(e["repetitions"]) == 2 for e in levels)
    for entry in levels:
        for key in (*SLO, "output_throughput"):
            assert len(entry["metrics"][key]) == 2, key
    assert record.metrics == levels[0]["metrics"]  # the lowest level's on top
    assert record.extra["repetitions"] == levels[0]["repetitions"]
    assert record.extra["warmup"] == levels[0]["warmup"]
    # the bench ran at each level's concurrency: throughput grows, but less than the requests
    out = [medians(e, "output_throughput") for e in levels]
    ttft = [medians(e, "p99_ttft_ms") for e in levels]
    assert out[0] < out[1] < out[2] < 16 * out[0] and out[1] < 4 * out[0]
    assert ttft[0] < ttft[1] < ttft[2]
    bench_log = (standin.root / "logs" / "baseline.bench.log").read_text()
    assert bench_log.count("max_concurrency=16") == 3
    names = [(name, d.get("load")) for name, d in phases]
    assert [d for name, d in phases if name == "level"] == [
        {"load": {"max-concurrency": n}, "level": i, "levels": 3}
        for i, n in enumerate((1, 4, 16), start=1)]
    level2 = names.index(("level", {"max-concurrency": 4}))
    assert names[level2 + 1:level2 + 4] == [("warmup", {"max-concurrency": 4}),
                                            ("result", {"max-concurrency": 4}),
                                            ("repetition", {"max-concurrency": 4})]
    assert names.count(("launching", None)) == 1
    assert not checkpoint_path(standin.root / "logs" / "baseline.log").exists()
    standin.assert_clean()


def test_a_speculative_server_wins_at_one_request_and_loses_at_sixteen(
    standin: Standin,
) -> None:
    gain = {"STANDIN_SPEC_GAIN": "0.6"}
    base = standin.config("baseline", role="baseline")
    eagle = standin.config("eagle3", server_args=EAGLE3, env=gain)
    plan = with_loads(standin.plan(base, eagle), warmup=False, reps=1)
    runs = [SGLangEngine().run(c, standin.ctx(plan, c.approach)) for c in (base, eagle)]
    ratio = [medians(e, "output_throughput") / medians(b, "output_throughput")
             for b, e in zip(runs[0].by_load, runs[1].by_load, strict=True)]
    assert ratio[0] > 1.3 and ratio[2] < 0.9  # a mixed result, as on a real GPU
    assert ratio[0] > ratio[1] > ratio[2]
    standin.assert_clean()


def test_a_server_that_dies_under_load_keeps_the_levels_it_measured(standin: Standin) -> None:
    config = standin.config("fragile", env={"STANDIN_FATAL_AT_RUNNING": "8"})
    plan = with_loads(standin.plan(config), warmup=False, reps=1,
                      loads={"max-concurrency": [1, 4, 16, 32]})
    record = SGLangEngine().run(config, standin.ctx(plan, "fragile"))
    assert record.status == "failed"
    levels = record.by_load
    assert [e["status"] for e in levels] == ["ok", "ok", "failed", "skipped"]
    assert len(levels[1]["metrics"]["output_throughput"]) == 1
    assert levels[3]["metrics"] == {} and levels[3]["repetitions"] == []
    assert record.samples("output_throughput") == levels[0]["metrics"]["output_throughput"]
    assert "CUDA out of memory" in record.log_tail
    standin.assert_clean()


def test_without_loads_nothing_changes_but_the_slo_keys_are_kept(standin: Standin) -> None:
    config = standin.config("baseline", role="baseline")
    plan = dataclasses.replace(standin.plan(config), slo={"p99_ttft_ms": 1000.0})
    phases: Phases = []
    record = SGLangEngine().run(config, standin.ctx(plan, "baseline", phases=phases))
    assert record.status == "ok"
    assert "by_load" not in record.to_dict() and "by_load" not in record.extra
    assert len(record.metrics["p99_ttft_ms"]) == 1
    assert all("load" not in d for _, d in phases) and "level" not in dict(phases)
    assert not checkpoint_path(standin.root / "logs" / "baseline.log").exists()


def test_vllm_one_server_every_level(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vllm = make_vllm_standin(tmp_path, monkeypatch)
    config = vllm.config("baseline", role="baseline")
    plan = with_loads(vllm.plan(config), warmup=False, reps=1)
    record = VLLMEngine().run(config, vllm.ctx(plan, "baseline"))
    assert record.status == "ok", record.log_tail
    assert len(vllm.notes("server")) == 1
    levels = record.by_load
    assert [e["load"]["max-concurrency"] for e in levels] == [1, 4, 16]
    assert all(set(SLO) <= set(e["metrics"]) for e in levels)
    out = [medians(e, "output_throughput") for e in levels]
    tpot = [medians(e, "median_tpot_ms") for e in levels]
    assert out[0] < out[1] < out[2] < 16 * out[0]
    assert tpot[0] < tpot[2]  # each request's tokens come slower under load
    assert record.metrics == levels[0]["metrics"]
    vllm.assert_clean()


_KILLED_RUN = """
import json, sys
from pathlib import Path
from jobs.core.plans import to_plan
from jobs.engines.base import RunContext
from jobs.engines.sglang.engine import SGLangEngine
plan = to_plan(json.loads(sys.argv[1]))
config = plan.configs[0]
marks = Path(sys.argv[3])
def on_phase(name, details):
    with marks.open("a") as handle:
        handle.write(json.dumps([name, details]) + "\\n")
ctx = RunContext(batch_id="b-test", plan=plan, log_path=Path(sys.argv[2]), fingerprint={},
                 on_phase=on_phase, should_stop=lambda: False)
SGLangEngine().run(config, ctx)
"""


def test_a_killed_run_resumes_at_the_level_it_reached(standin: Standin) -> None:
    config = standin.config("baseline", role="baseline")
    plan = with_loads(standin.plan(config), warmup=False, reps=1)
    log = standin.root / "logs" / "baseline.log"
    marks = standin.root / "phases.jsonl"
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_RUN, json.dumps(plan.to_dict()), str(log), str(marks)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd()),
                                                          os.environ["PYTHONPATH"]])})
    deadline = time.monotonic() + 60
    while not (marks.exists() and '"level": 2' in marks.read_text()
               and len(standin.notes("bench")) == 2):  # level 2's bench_serving has started
        assert child.poll() is None and time.monotonic() < deadline, "no level 2"
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)  # a worker killed during level 2
    child.wait()
    for pgid in {e["pgid"] for e in standin.notes()}:  # what a new worker's orphan sweep does
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    saved = json.loads(checkpoint_path(log).read_text())
    assert [e["load"] for e in saved["levels"]] == [{"max-concurrency": 1}]
    phases: Phases = []
    record = SGLangEngine().run(config, standin.ctx(plan, "baseline", phases=phases))
    assert record.status == "ok", record.log_tail
    assert record.by_load[0] == saved["levels"][0]  # level 1 from the checkpoint, not re-run
    assert [d["level"] for n, d in phases if n == "level"] == [2, 3]
    assert len(standin.notes("bench")) == 2 + 2  # the killed run's 2, then levels 2 and 3 only
    bench_log = (standin.root / "logs" / "baseline.bench.log").read_text()
    assert len(re.findall(r"max_concurrency=1\b", bench_log)) == 1
    assert len(standin.notes("server")) == 2  # the killed worker's, and this one
    assert "max-concurrency 1 was measured before a restart" in record.log_tail
    assert not checkpoint_path(log).exists()
    standin.assert_clean()


def test_a_checkpoint_of_another_plan_is_not_reused(standin: Standin) -> None:
    config = standin.config("baseline", role="baseline")
    plan = with_loads(standin.plan(config), warmup=False, reps=1)
    log = standin.root / "logs" / "baseline.log"
    log.parent.mkdir(parents=True)
    stale = {"key": "another plan", "levels": [{"load": {"max-concurrency": 1}, "status": "ok",
                                                "metrics": {"output_throughput": [1.0]}}]}
    checkpoint_path(log).write_text(json.dumps(stale))
    record = SGLangEngine().run(config, standin.ctx(plan, "baseline"))
    assert record.by_load[0]["metrics"]["output_throughput"] != [1.0]
    assert len(standin.notes("bench")) == 3
    assert "of another plan or configuration" in record.log_tail
    standin.assert_clean()


def test_vllm_speculation_wins_at_one_request_and_loses_at_sixteen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    vllm = make_vllm_standin(tmp_path, monkeypatch)
    fast = {"STANDIN_THROUGHPUT": "150"}
    base = vllm.config("baseline", role="baseline", env=fast)
    spec = {"STANDIN_SPEC_GAIN": "0.6", "STANDIN_SPEC_DECAY": "0.4"}  # 0.62x at 16
    eagle = vllm.config("eagle3", env={**fast, **spec}, server_args={
        "speculative-config": {"method": "eagle3", "model": "/models/d",
                               "num_speculative_tokens": 3}})
    plan = with_loads(vllm.plan(base, eagle), warmup=False, reps=1)
    plan = dataclasses.replace(plan, bench={**plan.bench, "random-output-len": 8})
    runs = [VLLMEngine().run(c, vllm.ctx(plan, c.approach)) for c in (base, eagle)]
    assert [r.status for r in runs] == ["ok", "ok"], runs[1].log_tail
    ratio = [medians(e, "output_throughput") / medians(b, "output_throughput")
             for b, e in zip(runs[0].by_load, runs[1].by_load, strict=True)]
    # wins at one request, loses at sixteen, less with each level (the figures are wall-clock
    # rates: their size is the bench's, the order is this test's)
    assert ratio[0] > 1 > ratio[2] and ratio[0] > ratio[1] > ratio[2], ratio
    vllm.assert_clean()
