"""The local engine: a tiny seeded Llama on the CPU, in-process and through real child processes."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from jobs.core.plans import BatchPlan, load_preset, resolve
from jobs.core.records import RunRecord
from jobs.core.rules import load_rules
from jobs.engines.base import RunContext
from jobs.engines.local import child as local_child
from jobs.engines.local import model as local_model
from jobs.engines.local.engine import LocalEngine
from jobs.engines.local.forked import ForkedGroup
from jobs.engines.procs import ProcessGroup, group_members

SMALL = ["--num-prompts", "6", "--input-len", "96", "--output-len", "48"]


@pytest.fixture(autouse=True)
def _one_data_dir(monkeypatch: pytest.MonkeyPatch, local_data_dir: Path) -> None:
    """One data dir for the engine's runs: the same environment, so the same warm fork server
    (tests/jobs/engines/conftest.py)."""
    monkeypatch.setenv("SPECBENCH_DATA_DIR", str(local_data_dir))


@pytest.fixture(scope="session")
def engine(local_engine: LocalEngine) -> LocalEngine:
    """The engine test_local_levels shares (tests/jobs/engines/conftest.py): its fork server
    imports torch once for every run."""
    return local_engine


@pytest.fixture(scope="module")
def torch() -> Any:
    """torch, imported by the tests that use it in this process, not at collection: a worker
    that runs none of them never imports it."""
    import torch

    return torch


@pytest.fixture(scope="module")
def model(torch: Any) -> Any:
    torch.set_num_threads(1)
    return local_model.build_target(local_child.parse_args(SMALL))


@pytest.fixture(scope="module")
def prompts(model: Any) -> list[list[int]]:
    return local_model.make_prompts(local_child.parse_args(SMALL), model)


def outputs_of(model: Any, prompts: list[list[int]], *flags: str) -> tuple[list[list[int]], int]:
    bench = local_child.Bench(local_child.parse_args([*SMALL, *flags]), model)
    outputs, _, forwards = bench.run(prompts)
    return outputs, forwards


def test_greedy_choices_are_far_sharper_than_float32_noise(
    torch: Any, model: Any, prompts: list[list[int]]
) -> None:
    margins, noise = [], []
    for prompt in prompts:
        ids = torch.tensor([prompt])
        with torch.no_grad():
            out = model.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=48,
                output_logits=True, return_dict_in_generate=True,
            )
            stepwise = torch.stack(out.logits)[:, 0]  # one token at a time, with the KV cache
            at_once = model(input_ids=out.sequences[:, :-1]).logits[0, len(prompt) - 1 :]
        top2 = stepwise.topk(2).values
        margins.append((top2[:, 0] - top2[:, 1]).min().item())
        noise.append((stepwise - at_once).abs().max().item())
    # The smallest gap between the best and second-best logit over 288 greedy choices dwarfs
    # the difference between incremental and batched computation of the same logits
    # (measured: a gap of at least 0.38 against a difference of at most 2.3e-5).
    assert min(margins) > 1000 * max(max(noise), 1e-7)


def test_drafts_and_prompt_lookup_give_the_plain_greedy_output(
    model: Any, prompts: list[list[int]]
) -> None:
    plain, plain_forwards = outputs_of(model, prompts)
    assert plain_forwards == sum(len(o) for o in plain)
    assert len({t for o in plain for t in o}) >= 10  # repetitive, but not one token over and over
    for flags in (["--draft-layers", "1"], ["--draft-layers", "2"],
                  ["--prompt-lookup-num-tokens", "10"]):
        spec, forwards = outputs_of(model, prompts, *flags)
        assert spec == plain, flags
        # Verification both accepted and rejected guesses, so equality is not luck.
        assert len(plain) < forwards < plain_forwards, flags


def test_an_unknown_knob_is_rejected_like_argparse_with_a_hint() -> None:
    plan = _plan(approach={"draft-layer": 1})
    reasons = LocalEngine().preflight(plan)
    assert reasons == {
        "prompt-lookup": "local_child: error: unrecognized arguments: --draft-layer "
        "(did you mean --draft-layers?)"
    }
    match = load_rules().classify(reasons["prompt-lookup"])
    assert match is not None and match.tag == "bad-config"


def test_the_cpu_demo_preset_loads_and_resolves() -> None:
    plan = resolve(load_preset("cpu-demo"))
    assert plan.engine == "local" and plan.baseline.approach == "baseline"
    assert [c.approach for c in plan.approaches] == [
        "draft-1-layer", "draft-2-layers", "draft-own-vocab", "prompt-lookup",
        "prompt-lookup-3gram",
    ]
    assert any("prompt-lookup-3gram: threads" in w for w in plan.warnings)
    assert LocalEngine().preflight(plan) == {}
    resolve(load_preset("cpu-demo"), overrides={"threads": 2, "seed": 1})


def test_fingerprint_names_the_cpu_in_spec_keys(torch: Any) -> None:
    fingerprint = LocalEngine().fingerprint()
    assert fingerprint["gpu"].startswith("none (CPU: ")
    assert fingerprint["gpu_count"] == 0 and fingerprint["cuda"] is None
    assert fingerprint["torch"] == torch.__version__


def test_baseline_and_prompt_lookup_run_end_to_end(engine: LocalEngine, tmp_path: Path) -> None:
    plan = _plan()
    phases: list[tuple[str, dict[str, Any]]] = []
    base = _run(engine, plan, 0, tmp_path, on_phase=lambda p, d: phases.append((p, d)))
    assert base.status == "ok", base.log_tail
    assert len(base.metrics["output_throughput"]) == 2 and base.accept_length is None
    assert ("repetition", {"rep": 2, "of": 2}) in phases and phases[0][0] == "launching"
    names = [name for name, _ in phases]
    assert names[names.index("ready"):] == [
        "ready", "warmup", "result", "repetition", "result", "repetition", "result", "stopping"]
    warm = next(d for name, d in phases if name == "result")  # the warm-up's
    assert warm == {"rep": 0, "of": 2, "metric": "output_throughput", "warmup": True,
                    "value": base.extra["warmup"]["output_throughput"]}
    lookup = _run(engine, plan, 1, tmp_path, baseline=base)
    assert lookup.status == "ok", lookup.log_tail
    assert lookup.accept_length is not None and lookup.accept_length > 1.5
    assert lookup.extra["output_digest"] == base.extra["output_digest"]
    assert all(v > 0 for v in lookup.metrics["output_throughput"])
    assert "--baseline-digest" in lookup.log_tail.splitlines()[0]


def test_the_warm_up_is_recorded_and_never_a_sample(engine: LocalEngine, tmp_path: Path) -> None:
    """One pass before the repetitions: its figures in the record's `warmup`, its
    throughput in no metric list; `--warmup` reaches the child only when the plan has one."""
    plan = _plan()
    phases: list[tuple[str, dict[str, Any]]] = []
    record = _run(engine, plan, 0, tmp_path, on_phase=lambda p, d: phases.append((p, d)))
    assert record.status == "ok", record.log_tail
    warmup = record.extra["warmup"]
    assert warmup["completed"] == 2 and warmup["tokens"] == 2 * 48
    assert warmup["output_throughput"] > 0 and warmup["seconds"] > 0
    samples = record.metrics["output_throughput"]
    assert len(samples) == plan.reps
    results = [d for name, d in phases if name == "result"]
    assert [d["value"] for d in results[1:]] == samples
    assert results[0]["value"] == warmup["output_throughput"] not in samples
    assert "local_child: warm-up: 96 tokens in" in record.log_tail
    assert json.loads(record.to_json())["warmup"] == warmup
    assert "--warmup" in LocalEngine().to_child_argv(plan.baseline, _ctx(plan, tmp_path))


def test_warmup_false_runs_no_warm_up(engine: LocalEngine, tmp_path: Path) -> None:
    plan = dataclasses.replace(_plan(), warmup=False)
    assert "--warmup" not in LocalEngine().to_child_argv(plan.baseline, _ctx(plan, tmp_path))
    phases: list[tuple[str, dict[str, Any]]] = []
    record = _run(engine, plan, 0, tmp_path, on_phase=lambda p, d: phases.append((p, d)))
    assert record.status == "ok", record.log_tail
    assert record.extra["warmup"] is None
    assert "warmup" not in [name for name, _ in phases]
    assert len(record.metrics["output_throughput"]) == plan.reps
    assert "warm-up" not in record.log_tail


def test_an_output_that_differs_from_the_baseline_fails(
    engine: LocalEngine, tmp_path: Path
) -> None:
    plan = _plan()
    forged = RunRecord(
        batch="b-test", preset="cpu-demo", approach="baseline", role="baseline", status="ok",
        server_args=plan.baseline.server_args,
        extra={"output_digest": "0" * 64, "prompt_digests": ["0" * 12, "0" * 12]},
    )
    record = _run(engine, plan, 1, tmp_path, baseline=forged)
    assert record.status == "failed" and record.exit_code == 1
    assert "LosslessnessError: greedy output differs from the baseline's at prompt 0" in (
        record.log_tail
    )


def test_a_draft_with_another_vocabulary_fails_as_bad_config(
    engine: LocalEngine, tmp_path: Path
) -> None:
    plan = _plan(approach={"draft-layers": 1, "draft-vocab-size": 2048})
    record = _run(engine, plan, 1, tmp_path)
    assert record.status == "failed" and record.exit_code == 1
    last = record.log_tail.splitlines()[-1]
    assert "--draft-vocab-size 2048 and --vocab-size 1024 cannot be used together" in last
    match = load_rules().classify(record.log_tail)
    assert match is not None and match.tag == "bad-config"


def test_a_cancel_stops_the_process_group_before_its_repetitions_end(
    engine: LocalEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    groups = record_groups(engine, monkeypatch)
    plan = dataclasses.replace(_plan(), reps=50)
    asked: list[float] = []

    def should_stop() -> bool:
        ready = bool(groups) and any(
            line.startswith(local_child.EVENT_PREFIX) for line in groups[0].tail)
        if ready and not asked:
            asked.append(time.monotonic())
        return bool(asked)

    record = _run(engine, plan, 0, tmp_path, should_stop=should_stop)
    # cancelled while its 50 repetitions ran: stopped, not run to the end
    assert asked and record.status == "cancelled" and record.exit_code is not None
    assert len(record.samples("output_throughput")) < 50
    assert group_members(groups[0].pgid) == []
    assert isinstance(groups[0], ForkedGroup)  # from the warm server, its own session


def test_a_forked_child_that_crashes_fails_and_leaves_nothing(
    engine: LocalEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    groups = record_groups(engine, monkeypatch)
    plan = dataclasses.replace(_plan(), reps=50)
    killed: list[int] = []

    def on_phase(phase: str, details: dict[str, Any]) -> None:
        if phase == "ready" and not killed:
            pid = groups[0].pgid
            assert os.getsid(pid) == pid and os.getpgid(pid) == pid
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    record = _run(engine, plan, 0, tmp_path, on_phase=on_phase)
    assert killed and isinstance(groups[0], ForkedGroup)
    assert record.status == "failed" and record.exit_code == -signal.SIGKILL
    assert group_members(groups[0].pgid) == []


def test_the_configuration_env_reaches_the_forked_child(tmp_path: Path) -> None:
    """OMP_NUM_THREADS is read when torch loads: a child forked from a server started with
    another environment would ignore it, so another environment gets its own server. An engine
    of its own: its second server would replace the shared one."""
    plan = _plan()
    base = plan.baseline
    args = {k: v for k, v in base.server_args.items() if k != "threads"}
    config = dataclasses.replace(base, server_args=args, env={"OMP_NUM_THREADS": "1"})
    engine = LocalEngine()
    try:
        record = _run(engine, dataclasses.replace(plan, configs=(config,)), 0, tmp_path)
    finally:
        engine.close()
    assert record.status == "ok", record.log_tail
    assert ", 1 threads" in record.log_tail  # torch's default is one per core
    assert engine.launcher.fresh == 0 and engine.launcher.servers == 1


def record_groups(engine: LocalEngine, monkeypatch: pytest.MonkeyPatch) -> list[ProcessGroup]:
    """The groups `engine` starts from now on, in order."""
    groups: list[ProcessGroup] = []
    start = engine.launcher.start

    def recorded(*args: Any, **kwargs: Any) -> ProcessGroup:
        groups.append(start(*args, **kwargs))
        return groups[-1]

    monkeypatch.setattr(engine.launcher, "start", recorded)
    return groups


def _plan(*, approach: dict[str, Any] | None = None) -> BatchPlan:
    """cpu-demo cut down to its baseline and one approach, with a tiny bench."""
    full = resolve(load_preset("cpu-demo"))
    base = full.baseline
    lookup = dataclasses.replace(
        full.config("prompt-lookup"),
        server_args={**base.server_args, **(approach or {"prompt-lookup-num-tokens": 10})},
    )
    return dataclasses.replace(
        full, reps=2, startup_s=60, bench_s=30, configs=(base, lookup),
        bench={"num-prompts": 2, "input-len": 64, "output-len": 48},
    )


def _ctx(plan: BatchPlan, tmp_path: Path) -> RunContext:
    return RunContext(
        batch_id="b-test", plan=plan, log_path=tmp_path / "ctx.log", fingerprint={},
        on_phase=lambda phase, details: None, should_stop=lambda: False,
    )


def _run(
    engine: LocalEngine,
    plan: BatchPlan,
    index: int,
    tmp_path: Path,
    *,
    baseline: RunRecord | None = None,
    on_phase: Any = None,
    should_stop: Any = None,
) -> RunRecord:
    config = plan.configs[index]
    ctx = RunContext(
        batch_id="b-test", plan=plan, log_path=tmp_path / f"{config.approach}.log",
        fingerprint={}, on_phase=on_phase or (lambda phase, details: None),
        should_stop=should_stop or (lambda: False), baseline=baseline,
    )
    return engine.run(config, ctx)
