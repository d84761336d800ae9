"""Which collectives a batch needs measured, and each record's evidence (issue 24, item 2)."""

from __future__ import annotations

import json
from pathlib import Path

from jobs.core.engine_info import describe
from jobs.core.plans import load_preset, resolve
from jobs.evidence.model_shape import read_shape
from jobs.evidence.plan_evidence import groups, need_of, record_evidence

KIMI = {"text_config": {"num_hidden_layers": 61, "hidden_size": 7168, "torch_dtype": "bfloat16",
                        "n_routed_experts": 384}}


def test_the_seeds_batch_probes_once_per_tp_and_collective_env(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(KIMI))
    plan = resolve(load_preset("eagle3"), reps=1)
    info = describe("sglang")
    needs = {c.approach: need_of(c, info, read=lambda _: read_shape(tmp_path))
             for c in plan.configs}
    assert needs["eagle3"].world == 8 and needs["eagle3"].tokens == 4
    assert not needs["eagle3"].split
    assert needs["eagle3"].bytes == 57344 and needs["baseline"].bytes == 14336
    assert needs["eagle3-nccl-tree"].env == (("NCCL_ALGO", "Tree"),)
    found = groups(needs.values())
    assert found[(8, ())] == [14336, 57344]
    assert found[(8, (("NCCL_ALGO", "Tree"),))] == [57344]
    assert len(found) == 3  # plain, NCCL_ALGO=Tree, fewer channels
    probe = {"backend": "nccl", "world": 8, "env": {},
             "sizes": [{"bytes": 57344, "latency_us": 250.0, "algbw_gbps": 0.23,
                        "busbw_gbps": 0.4}]}
    evidence = record_evidence(needs["eagle3"], probe)
    assert evidence["model"] == {"layers": 61, "hidden_size": 7168, "dtype_bytes": 2,
                                 "experts": 384}
    assert evidence["allreduce"]["latency_us"] == 250.0 and evidence["allreduces"] == 122


def test_missing_pieces_are_reasons(tmp_path: Path) -> None:
    plan = resolve(load_preset("eagle3"), reps=1)
    need = need_of(plan.configs[1], describe("sglang"))  # /models/... is not on this host
    assert need.missing is not None and "no config.json in /models/Kimi-K2.5" in need.missing
    assert record_evidence(need, None)["missing"] == need.missing
    assert groups([need]) == {}


def test_the_local_engine_measures_a_two_rank_split_of_its_knobs() -> None:
    plan = resolve(load_preset("cpu-demo"), reps=1)
    needs = {c.approach: need_of(c, describe("local")) for c in plan.configs}
    assert needs["baseline"].world == 2 and needs["baseline"].missing is None
    assert needs["baseline"].bytes == 64 * 4  # hidden 64, float32, one token
    assert needs["prompt-lookup"].tokens == 11 and needs["draft-1-layer"].tokens == 5
    assert needs["baseline"].model is not None and needs["baseline"].model.allreduces == 8
    assert needs["baseline"].split  # one process: what a 2-rank split would cost
