"""Presets: every shipped preset loads; validation errors name the file, the key and the line."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from jobs.core.plans import (
    find_preset,
    load_all,
    load_preset,
    parse_preset,
    preset_names,
    resolve,
    to_plan,
)
from jobs.core.rules import load_rules
from jobs.core.verdicts import Metric, judge
from jobs.engines.sglang.engine import SGLangEngine
from jobs.errors import PresetError, UserError
from tests.conftest import SEED, need_shared
from tests.standin.harness import Standin, make_standin

GOOD = """\
name: p
description: a small preset
metric: output_throughput
overridable: [mem-fraction-static]
baseline:
  server_args: {model-path: /m, mem-fraction-static: 0.85}
approaches:
  - name: a
    hypothesis: a helps
    server_args: {cuda-graph-max-bs: 128}
  - name: b
    extends: a
    env: {NCCL_ALGO: Tree}
"""


def _error(text: str, *, stem: str = "p") -> str:
    with pytest.raises(PresetError) as info:
        parse_preset(text, source=f"cfg/{stem}.yaml", stem=stem)
    message = str(info.value)
    assert "\n" not in message, message
    assert message.startswith(f"cfg/{stem}.yaml"), message
    return message


# --------------------------------------------------------------------------- shipped presets


def test_every_shipped_preset_loads_and_resolves() -> None:
    names = preset_names()
    assert "eagle3" in names
    presets = load_all()
    assert [p.name for p in presets] == names
    for preset in presets:
        plan = resolve(preset)
        assert plan.baseline.role == "baseline"
        assert [c.approach for c in plan.approaches] == [a.name for a in preset.approaches]
        json.dumps(plan.to_dict())  # plans travel as JSON


def test_warmup_is_on_by_default_off_with_false_and_travels_in_the_plan() -> None:
    assert "warmup" not in GOOD
    on = parse_preset(GOOD, source="cfg/p.yaml", stem="p")
    assert on.warmup is True and resolve(on).warmup is True
    off = parse_preset(GOOD + "warmup: false\n", source="cfg/p.yaml", stem="p")
    plan = resolve(off, reps=5)
    assert off.warmup is False and plan.warmup is False and plan.reps == 5
    assert to_plan(json.loads(json.dumps(plan.to_dict()))).warmup is False  # store, broker
    assert all(p.warmup for p in load_all()), "every shipped preset warms up"


def test_a_warmup_that_is_not_true_or_false_names_the_key() -> None:
    message = _error(GOOD + "warmup: often\n")
    assert "key 'warmup'" in message and "valid boolean" in message


def test_eagle3_has_no_confound_and_matches_the_seed_session() -> None:
    preset = load_preset("eagle3")
    plan = resolve(preset)
    # Unlike the article, the shipped preset keeps the baseline's mem-fraction-static.
    assert plan.warnings == ()
    fewer = plan.config("eagle3-nccl-fewer-channels")
    assert fewer.server_args["mem-fraction-static"] == plan.baseline.server_args[
        "mem-fraction-static"
    ]


def test_eagle3_runs_the_seed_sessions_approaches_in_its_order() -> None:
    preset = load_preset("eagle3")
    seed = need_shared(SEED)
    seeded = [json.loads(line)["approach"] for line in seed.read_text().splitlines() if line]
    assert ["baseline", *[a.name for a in preset.approaches]] == seeded


def test_eagle3_extends_inherits_the_parent() -> None:
    plan = resolve(load_preset("eagle3"))
    tree = plan.config("eagle3-nccl-tree")
    assert tree.parent == "eagle3"
    assert tree.server_args["speculative-algorithm"] == "EAGLE3"
    assert tree.env == {"NCCL_ALGO": "Tree"}
    assert tree.change["env"] == {"NCCL_ALGO": "Tree"}
    assert tree.change["server_args"]["speculative-algorithm"] == "EAGLE3"
    assert plan.config("eagle3").parent is None


def test_load_by_path_and_config_dir_override(config_copy: Path) -> None:
    (config_copy / "presets" / "tiny.yaml").write_text(GOOD.replace("name: p", "name: tiny"))
    assert "tiny" in preset_names()
    assert load_preset("tiny").name == "tiny"
    path = config_copy / "presets" / "tiny.yaml"
    assert load_preset(str(path)).source == str(path)


def test_unknown_preset_suggests_a_name() -> None:
    with pytest.raises(PresetError, match=r"unknown preset 'eagle'.*did you mean 'eagle3'"):
        find_preset("eagle")
    with pytest.raises(PresetError, match="no preset file"):
        find_preset("missing/dir/x.yaml")


def test_env_values_become_strings() -> None:
    preset = parse_preset(
        GOOD.replace("env: {NCCL_ALGO: Tree}", "env: {NCCL_MIN_NCHANNELS: 4, FLAG: true}"),
        source="p.yaml", stem="p",
    )
    assert preset.approach("b").env == {"NCCL_MIN_NCHANNELS": "4", "FLAG": "1"}
    with pytest.raises(PresetError, match="no approach 'zz'"):
        preset.approach("zz")


def test_presets_are_frozen() -> None:
    preset = parse_preset(GOOD, source="p.yaml", stem="p")
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen-instance error
        preset.name = "q"  # type: ignore[misc]


# --------------------------------------------------------------------------- errors


def test_unknown_key_names_key_file_and_line() -> None:
    message = _error(GOOD + "colour: red\n")
    assert "unknown key 'colour'" in message
    assert message.startswith("cfg/p.yaml:14:")


def test_unknown_key_inside_an_approach() -> None:
    text = GOOD.replace("    hypothesis: a helps\n", "    hypotesis: a helps\n")
    message = _error(text)
    assert "hypotesis" in message and "approaches[a]" in message
    assert message.startswith("cfg/p.yaml:9:")


def test_missing_key() -> None:
    text = GOOD.split("baseline:")[0] + "approaches:\n  - name: a\n"
    assert "missing key 'baseline'" in _error(text)


def test_wrong_type_names_the_key() -> None:
    text = GOOD.replace("metric: output_throughput", "metric: output_throughput\nreps: 0")
    message = _error(text)
    assert "'reps'" in message and ":4:" in message


def test_invalid_yaml_names_the_line() -> None:
    message = _error(GOOD + "bench: [1, 2\n")
    assert "invalid YAML" in message
    assert message.startswith("cfg/p.yaml:15:")


def test_not_a_mapping() -> None:
    assert "mapping" in _error("- just\n- a list\n")


def test_dangling_extends_suggests_a_name() -> None:
    message = _error(GOOD.replace("extends: a", "extends: aa"))
    assert "extends" in message and "'aa'" in message and "did you mean 'a'" in message
    assert message.startswith("cfg/p.yaml:12:")


def test_extends_loop() -> None:
    text = GOOD.replace("  - name: a\n", "  - name: a\n    extends: b\n")
    message = _error(text)
    assert "loop" in message and "a -> b -> a" in message


def test_self_extends_is_a_loop() -> None:
    assert "loop" in _error(GOOD.replace("extends: a", "extends: b"))


def test_name_must_equal_the_stem() -> None:
    message = _error(GOOD, stem="q")
    assert "'name'" in message and "'p'" in message and "'q'" in message
    assert message.startswith("cfg/q.yaml:1:")


def test_duplicate_approach() -> None:
    message = _error(GOOD + "  - name: a\n")
    assert "'a' is repeated" in message and "approaches[2]" in message


def test_reserved_and_bad_approach_names() -> None:
    assert "reserved" in _error(GOOD.replace("name: b", "name: baseline"))
    message = _error(GOOD.replace("name: b", "name: b-x y"))
    assert "approaches[b-x y].name" in message and message.startswith("cfg/p.yaml:11:")


def test_no_approaches() -> None:
    text = GOOD.split("approaches:")[0] + "approaches: []\n"
    assert "'approaches'" in _error(text)


def test_errors_are_user_errors() -> None:
    with pytest.raises(UserError) as info:
        parse_preset("name: [\n", source="x.yaml")
    assert info.value.exit_code == 2


# --------------------------------------------------------------------------- eagle3 on real flags


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Standin:
    setup = make_standin(tmp_path, monkeypatch)
    # the preset's own env is {}: the stand-in's tags come through the worker's environment
    monkeypatch.setenv("STANDIN_TAG", setup.tag)
    monkeypatch.setenv("STANDIN_INFO_FILE", str(setup.info_file))
    monkeypatch.setenv("STANDIN_HEALTH_S", "0.05")
    # a request is held for its decode time at this speed (at most 50 ms): these tests assert
    # flags, samples and fallbacks, never the figures, so the 4 load levels need not take seconds
    monkeypatch.setenv("STANDIN_THROUGHPUT", "1000000")
    return setup


def test_eagle3_benches_offline_and_is_honest_about_custom_all_reduce() -> None:
    plan = resolve(load_preset("eagle3"))
    assert plan.bench["dataset-name"] == "random-ids"  # `random` would download ShareGPT
    assert "dataset-path" not in plan.bench
    assert plan.baseline.server_args["disable-custom-all-reduce"] is True
    custom = plan.config("eagle3-custom-allreduce")
    assert "disable-custom-all-reduce" not in custom.server_args  # the flag is left out
    assert "disable-custom-all-reduce" in custom.change["server_args"]  # and that is the change
    assert not any("pcie" in key for c in plan.configs for key in c.server_args)


@pytest.mark.parametrize(
    ("version", "refused", "graph_flag"),
    [
        ("0.5.2", {"eagle3-torch-symm-mem", "eagle3-ep-flashinfer-a2a"}, "cuda-graph-max-bs"),
        ("0.5.15", set(), "cuda-graph-max-bs-decode"),
        ("0.5.23", set(), "cuda-graph-max-bs-decode"),
    ],
)
def test_eagle3_s_baseline_is_measured_on_real_flag_sets(
    standin: Standin, monkeypatch: pytest.MonkeyPatch, version: str, refused: set[str],
    graph_flag: str,
) -> None:
    monkeypatch.setenv("STANDIN_VERSION", version)
    plan = resolve(load_preset("eagle3"))
    engine = SGLangEngine()
    reasons = engine.preflight(plan)
    assert set(reasons) == refused
    for reason in reasons.values():
        assert f"this is {version}" in reason
    baseline = plan.baseline
    record = engine.run(baseline, standin.ctx(plan, "baseline"))
    assert record.status == "ok", record.log_tail[-2000:]
    assert len(record.samples("output_throughput")) == plan.reps == 3
    assert record.server_args[graph_flag] == 512
    assert [r["seed"] for r in record.extra["repetitions"]] == [1, 2, 3]
    assert all(r["completed"] == r["sent"] == plan.requests == 128
               for r in record.extra["repetitions"])
    standin.assert_clean()


def test_eagle3_on_0_5_23_and_8_pcie_sm120_gpus_falls_back_twice(
    standin: Standin, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STANDIN_VERSION", "0.5.23")
    plan = dataclasses.replace(resolve(load_preset("eagle3"), reps=1), warmup=False,
                               bench={"dataset-name": "random-ids", "num-prompts": 4,
                                      "random-input-len": 16, "random-output-len": 16})
    engine, rules = SGLangEngine(), load_rules()
    base = engine.run(plan.baseline, standin.ctx(plan, "baseline"))
    assert "fallbacks" not in base.extra
    expected = {
        "eagle3-torch-symm-mem": "TorchSymmMemCommunicator: Device capability 12 not supported",
        "eagle3-custom-allreduce": "CustomAllreduce is disabled because it's not supported on "
                                   "more than two PCIe-only GPUs",
    }
    for name, line in expected.items():
        record = engine.run(plan.config(name), standin.ctx(plan, name))
        assert record.status == "ok"
        verdict = judge(record, base, metric=Metric(), rules=rules)
        assert (verdict.verdict, verdict.reason) == ("inconclusive", "fallback"), verdict
        assert line in verdict.why
    standin.assert_clean()
