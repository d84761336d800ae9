"""The vLLM engine against the vLLM stand-in (tests/standin/vllm, read from the real 0.33.0):
command lines, readiness, the saved result, the accept length, failures and fallbacks."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest

from jobs.core.plans import BatchPlan, RunConfig
from jobs.core.rules import load_rules
from jobs.core.verdicts import Metric, judge
from jobs.engines import get_engine, type_table
from jobs.engines.sglang import probe as sglang_probe
from jobs.engines.vllm.engine import VLLMEngine, counters_of, to_cli_args
from jobs.errors import UserError
from tests.standin.harness import Standin, make_standin

BENCH = {"dataset-name": "random", "random-input-len": 8, "random-output-len": 4,
         "num-prompts": 2, "max-concurrency": 1}
ARGS = {"model": "/models/tiny", "tensor-parallel-size": 1, "disable-custom-all-reduce": True}
EAGLE3 = {"speculative-config": {"method": "eagle3", "model": "/models/tiny-eagle3",
                                 "num_speculative_tokens": 3}}


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Standin:
    setup = make_standin(tmp_path, monkeypatch)
    monkeypatch.setenv("SPECBENCH_VLLM_PYTHON", sys.executable)
    return setup


def config(standin: Standin, name: str, *, role: str = "approach", mode: str = "ok",
           server_args: dict[str, Any] | None = None, env: dict[str, str] | None = None,
           ) -> RunConfig:
    made = standin.config(name, mode, role=role, env=env)
    args = {**ARGS, **(server_args or {})}
    return dataclasses.replace(made, server_args=args,
                               change={"server_args": dict(server_args or {}), "env": {}})


def plan(*configs: RunConfig, reps: int = 2) -> BatchPlan:
    return BatchPlan(preset="vllm-test", engine="vllm", queue="default",
                     metric="output_throughput", lower_is_better=False, min_effect_pct=2.0,
                     reps=reps, startup_s=20.0, bench_s=20.0, bench=dict(BENCH),
                     configs=configs)


def test_the_speller_passes_a_mapping_as_json_and_never_the_model_as_a_flag() -> None:
    assert to_cli_args({"model": "/m", "tensor-parallel-size": 8, "enforce-eager": True,
                        "disable-custom-all-reduce": False, "speculative-config": {
                            "method": "eagle3", "num_speculative_tokens": 3}}) == [
        "--tensor-parallel-size", "8", "--enforce-eager",
        "--speculative-config", '{"method":"eagle3","num_speculative_tokens":3}']


def test_counters_are_summed_over_their_labels() -> None:
    page = ('# TYPE vllm:spec_decode_num_drafts counter\n'
            'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0\n'
            'vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 5.0\n'
            'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 24.0\n'
            'vllm:num_requests_running{engine="0"} 1.0\n')
    assert counters_of(page) == {"vllm:spec_decode_num_drafts": 15.0,
                                 "vllm:spec_decode_num_accepted_tokens": 24.0}


def test_a_run_measures_and_the_speculative_one_has_its_accept_length(
    standin: Standin,
) -> None:
    base = config(standin, "baseline", role="baseline")
    fast = config(standin, "eagle3", server_args=EAGLE3, env={"STANDIN_THROUGHPUT": "140"})
    fast = dataclasses.replace(fast, change={"server_args": EAGLE3,
                                             "env": {"STANDIN_THROUGHPUT": "140"}})
    batch = plan(base, fast)
    engine = get_engine("vllm")
    assert isinstance(engine, VLLMEngine) and engine.preflight(batch) == {}
    phases: list[tuple[str, dict[str, Any]]] = []
    records = [engine.run(c, standin.ctx(batch, c.approach, phases=phases)) for c in (base, fast)]
    assert [r.status for r in records] == ["ok", "ok"]
    assert len(records[0].samples("output_throughput")) == 2
    assert records[0].accept_length is None
    assert records[1].accept_length is not None and 1.5 < records[1].accept_length < 3.5
    assert records[1].engine == "vllm"
    assert [name for name, _ in phases[:3]] == ["launching", "ready", "warmup"]
    verdict = judge(records[1], records[0], metric=Metric(), rules=load_rules())
    assert verdict.verdict == "improved", verdict.why
    server = standin.notes("server")[0]
    assert server["role"] == "server"
    standin.assert_clean()


def test_out_of_memory_fails_at_once_with_vllms_line(standin: Standin) -> None:
    base = config(standin, "baseline", role="baseline")
    oom = config(standin, "oom", mode="fatal-then-hang", env={"STANDIN_FATAL": "oom"},
                 server_args={"gpu-memory-utilization": 0.99})
    batch = plan(base, oom)
    record = VLLMEngine().run(oom, standin.ctx(batch, "oom"))
    assert record.status == "failed"
    assert "No available memory for the cache blocks" in record.log_tail
    verdict = judge(record, record, metric=Metric(), rules=load_rules())
    assert verdict.cause == "out-of-memory"
    standin.assert_clean()


def test_custom_all_reduce_falling_back_makes_the_approach_inconclusive(
    standin: Standin,
) -> None:
    base = config(standin, "baseline", role="baseline", server_args={"tensor-parallel-size": 8})
    car = config(standin, "car", server_args={"tensor-parallel-size": 8,
                                              "disable-custom-all-reduce": False})
    car = dataclasses.replace(car, change={"server_args": {"disable-custom-all-reduce": False},
                                           "env": {}})
    batch = plan(base, car)
    engine = VLLMEngine()
    records = [engine.run(c, standin.ctx(batch, c.approach)) for c in (base, car)]
    assert records[1].extra["fallbacks"] and "Custom allreduce is disabled" in (
        records[1].extra["fallbacks"][0])
    verdict = judge(records[1], records[0], metric=Metric(), rules=load_rules())
    assert verdict.verdict == "inconclusive" and verdict.reason == "fallback"
    standin.assert_clean()


def test_preflight_refuses_a_flag_the_release_lacks_and_takes_abbreviations(
    standin: Standin,
) -> None:
    base = config(standin, "baseline", role="baseline", server_args={"gpu-memory-util": 0.8})
    gone = config(standin, "gone", server_args={"use-v2-block-manager": True})
    refused = VLLMEngine().preflight(plan(base, gone))
    assert list(refused) == ["gone"]
    assert refused["gone"].startswith(
        "main.py: error: unrecognized arguments: --use-v2-block-manager")
    assert standin.notes("server") == []


def test_a_configuration_without_a_model_is_refused() -> None:
    with pytest.raises(UserError, match="needs server_args.model"):
        VLLMEngine().run(RunConfig(approach="x", role="baseline", parent=None, hypothesis="",
                                   change={}, server_args={}, env={}), None)  # type: ignore[arg-type]


def test_the_type_table_refuses_a_mapping_for_a_plain_flag_and_an_unknown_key() -> None:
    table = type_table("vllm")
    assert table is not None
    plain = table.lookup("max-num-seqs")
    assert plain is not None and plain.refusal("max-num-seqs", {"a": 1}, engine="vLLM") == (
        "max-num-seqs takes no mapping (no JSON) (vLLM), got {'a': 1}")
    spec = table.lookup("speculative-config")
    assert spec is not None
    assert spec.refusal("speculative-config", EAGLE3["speculative-config"], engine="vLLM") is None
    assert spec.refusal("speculative-config", {"method": "eagle3", "num_spec_tokens": 3},
                        engine="vLLM") == (
        "speculative-config has no key 'num_spec_tokens' (vLLM: Unexpected keyword argument); "
        "did you mean 'num_speculative_tokens'?")


def test_no_vllm_behind_the_interpreter_is_an_infrastructure_failure(
    standin: Standin, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # no stand-in: nothing to import
    sglang_probe.clear_memory()
    with pytest.raises(Exception, match="SPECBENCH_VLLM_PYTHON=.*cannot import vllm"):
        VLLMEngine().preflight(plan(config(standin, "baseline", role="baseline")))


def test_secret_args_reach_vllm_resolved_and_its_log_masks_them(
    standin: Standin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM's `--api-key` takes several keys (nargs +): each reference is read on the worker as
    the server starts; vLLM's `non-default args` line shows them masked, the record keeps the
    references (issue 32, item 9)."""
    keys = ("sk-vllm-argref-1a2b3c4d", "sk-vllm-argref-5e6f7a8b")
    monkeypatch.setenv("SB_KEY_A", keys[0])
    monkeypatch.setenv("SB_KEY_B", keys[1])
    refs = ["${SB_KEY_A}", "${SB_KEY_B}"]
    base = config(standin, "baseline", role="baseline", server_args={"api-key": refs})
    batch = plan(base, reps=1)
    record = VLLMEngine().run(base, standin.ctx(batch, "baseline"))
    assert record.status == "ok", record.log_tail
    log = (standin.root / "logs" / "baseline.log").read_text()
    assert "'api_key': ['***', '***']" in log, log
    assert record.server_args["api-key"] == refs
    assert not [k for k in keys if k in log or k in repr(record)]
    standin.assert_clean()
