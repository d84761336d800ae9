"""Server metrics in the records of a real served run (issue 24, item 4): read from the
engine's /metrics while each repetition runs, per load level and on top (the lowest level's);
SGLang only when the configuration enables its metrics."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from jobs.engines.sglang.engine import SGLangEngine
from jobs.engines.vllm.engine import VLLMEngine
from tests.standin.harness import make_standin
from tests.standin.vllm_harness import make_vllm_standin


def test_a_vllm_run_keeps_its_server_metrics_per_repetition_and_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vllm = make_vllm_standin(tmp_path, monkeypatch)
    config = vllm.config("baseline", role="baseline")
    base = vllm.plan(config)
    bench = {k: v for k, v in base.bench.items() if k != "max-concurrency"}
    plan = dataclasses.replace(base, bench={**bench, "num-prompts": 8}, warmup=False, reps=2,
                               loads={"max-concurrency": [1, 8]})
    record = VLLMEngine().run(config, vllm.ctx(plan, "baseline"))
    assert record.status == "ok", record.log_tail
    found = record.extra["server_metrics"]
    assert [r["rep"] for r in found["repetitions"]] == [1, 2]
    assert all(r["polls"] >= 2 for r in found["repetitions"])  # a read at start and at stop
    levels = record.by_load
    assert [lv["server_metrics"]["repetitions"][0]["rep"] for lv in levels] == [1, 1]
    assert found == levels[0]["server_metrics"]  # the lowest level's on top
    vllm.assert_clean()


def test_sglang_is_read_only_with_enable_metrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    standin = make_standin(tmp_path, monkeypatch)
    plain = standin.config("baseline", role="baseline")
    plan = dataclasses.replace(standin.plan(plain), warmup=False, reps=1)
    record = SGLangEngine().run(plain, standin.ctx(plan, "baseline"))
    assert record.status == "ok" and "server_metrics" not in record.extra
    metered = dataclasses.replace(plain, server_args={**plain.server_args,
                                                      "enable-metrics": True})
    record = SGLangEngine().run(metered, standin.ctx(plan, "baseline"))
    assert record.status == "ok", record.log_tail
    reps = record.extra["server_metrics"]["repetitions"]
    assert len(reps) == 1 and reps[0]["errors"] == 0 and reps[0]["polls"] >= 2
