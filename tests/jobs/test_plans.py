"""Plans: extends, declares, flags, `--set` and the confounds a batch warns about."""

from __future__ import annotations

import json

import pytest

from jobs.core.plans import (
    Preset,
    confounds,
    load_preset,
    parse_preset,
    parse_sets,
    resolve,
    to_plan,
)
from jobs.errors import KnobError, UserError

PRESET = """\
name: p
overridable: [mem-fraction-static, cuda-graph-max-bs, NCCL_DEBUG]
reps: 3
baseline:
  server_args:
    model-path: /m
    tp-size: 8
    mem-fraction-static: 0.85
    cuda-graph-max-bs: 512
    trust-remote-code: true
    enable-metrics: true
  env: {NCCL_DEBUG: WARN}
approaches:
  - name: spec
    server_args: {speculative-algorithm: EAGLE3, speculative-num-steps: 3}
  - name: spec-deep
    extends: spec
    server_args: {speculative-num-steps: 5, enable-torch-compile: true}
  - name: spec-deeper
    extends: spec-deep
    env: {NCCL_ALGO: Tree}
  - name: spec-fewer-channels
    extends: spec
    env: {NCCL_MIN_NCHANNELS: "4", NCCL_MAX_NCHANNELS: "4"}
    server_args: {mem-fraction-static: 0.80}
    declares: [NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS]
  - name: spec-fewer-channels-undeclared
    extends: spec
    env: {NCCL_MIN_NCHANNELS: "4", NCCL_MAX_NCHANNELS: "4"}
    server_args: {mem-fraction-static: 0.80}
  - name: no-metrics
    server_args: {enable-metrics: false, trust-remote-code: null}
"""


@pytest.fixture
def preset() -> Preset:
    return parse_preset(PRESET, source="p.yaml", stem="p")


def test_baseline_first_then_preset_order(preset: Preset) -> None:
    plan = resolve(preset)
    assert [c.approach for c in plan.configs] == [
        "baseline", "spec", "spec-deep", "spec-deeper", "spec-fewer-channels",
        "spec-fewer-channels-undeclared", "no-metrics",
    ]
    assert plan.baseline.change == {"server_args": {}, "env": {}}
    assert plan.reps == 3 and plan.queue == "default" and plan.metric == "output_throughput"


def test_extends_chain_layers_settings(preset: Preset) -> None:
    deeper = resolve(preset).config("spec-deeper")
    assert deeper.parent == "spec-deep"
    assert deeper.server_args["speculative-algorithm"] == "EAGLE3"  # from spec
    assert deeper.server_args["speculative-num-steps"] == 5  # spec-deep overrides spec
    assert deeper.server_args["enable-torch-compile"] is True
    assert deeper.env == {"NCCL_DEBUG": "WARN", "NCCL_ALGO": "Tree"}
    # the declared change without `declares`: everything set along the chain
    assert deeper.change == {
        "server_args": {
            "enable-torch-compile": True, "speculative-algorithm": "EAGLE3",
            "speculative-num-steps": 5,
        },
        "env": {"NCCL_ALGO": "Tree"},
    }


def test_declares_makes_an_extra_difference_a_confound(preset: Preset) -> None:
    plan = resolve(preset)
    fewer = plan.config("spec-fewer-channels")
    assert fewer.change["env"] == {"NCCL_MIN_NCHANNELS": "4", "NCCL_MAX_NCHANNELS": "4"}
    # declares lists the knobs under test; the chain's (spec's) knobs stay declared
    assert fewer.change["server_args"] == {
        "speculative-algorithm": "EAGLE3", "speculative-num-steps": 3,
    }
    assert "mem-fraction-static" not in fewer.change["server_args"]
    warned = [w for w in plan.warnings if w.startswith("spec-fewer-channels:")]
    assert len(warned) == 1
    assert "mem-fraction-static" in warned[0]
    assert "0.85" in warned[0] and "0.8" in warned[0]


def test_without_declares_every_setting_is_declared(preset: Preset) -> None:
    plan = resolve(preset)
    undeclared = plan.config("spec-fewer-channels-undeclared")
    assert undeclared.change["server_args"]["mem-fraction-static"] == 0.8
    assert not [w for w in plan.warnings if w.startswith("spec-fewer-channels-undeclared")]


def test_true_is_kept_false_and_null_remove(preset: Preset) -> None:
    plan = resolve(preset)
    assert plan.baseline.server_args["trust-remote-code"] is True
    removed = plan.config("no-metrics")
    assert "enable-metrics" not in removed.server_args
    assert "trust-remote-code" not in removed.server_args
    # removing a flag is the approach's change, not a confound
    assert set(removed.change["server_args"]) == {"enable-metrics", "trust-remote-code"}
    assert not [w for w in plan.warnings if w.startswith("no-metrics")]
    assert plan.warnings == tuple(w for w in plan.warnings if w.startswith("spec-fewer-channels:"))


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("0.80", 0.8), ("128", 128), ("true", True), ("false", False), ("null", None),
        ("Tree", "Tree"), ("'0.80'", "0.80"), ("", ""), ("a=b", "a=b"),
    ],
)
def test_set_values_are_yaml_scalars(raw: str, value: object) -> None:
    assert parse_sets([f"knob={raw}"]) == {"knob": value}


@pytest.mark.parametrize("item", ["novalue", "=1", "k=[1, 2]", "k={a: 1}"])
def test_bad_set_items(item: str) -> None:
    with pytest.raises(KnobError) as info:
        parse_sets([item])
    assert "\n" not in str(info.value)


def test_set_applies_to_baseline_and_every_approach_alike(preset: Preset) -> None:
    plan = resolve(
        preset, overrides=parse_sets(["cuda-graph-max-bs=256", "NCCL_DEBUG=INFO"])
    )
    for config in plan.configs:
        assert config.server_args["cuda-graph-max-bs"] == 256, config.approach
        assert config.env["NCCL_DEBUG"] == "INFO", config.approach
    # an override on the approach's own knob still wins over the approach: it is not a confound
    with_mem = resolve(preset, overrides={"mem-fraction-static": 0.7})
    assert {c.server_args["mem-fraction-static"] for c in with_mem.configs} == {0.7}
    assert not [w for w in with_mem.warnings if "mem-fraction-static" in w]
    assert with_mem.overrides == {"mem-fraction-static": 0.7}


def test_set_on_the_shipped_preset() -> None:
    plan = resolve(load_preset("eagle3"), overrides=parse_sets(["mem-fraction-static=0.80"]))
    assert {c.server_args["mem-fraction-static"] for c in plan.configs} == {0.8}
    assert plan.warnings == ()


def test_a_set_is_carried_in_the_plan_as_given_and_stored_as_its_value() -> None:
    """Read once (`parse_sets`), carried in the plan with the words as given; stored as knob ->
    value; a retry's new `--set` goes over the batch's own, each keeping its words."""
    sets = parse_sets(["mem-fraction-static=0.80", "cuda-graph-max-bs=128"])
    plan = resolve(load_preset("eagle3"), overrides=sets)
    assert plan.overrides.given("mem-fraction-static") == "mem-fraction-static=0.80"
    stored = json.loads(json.dumps(plan.to_dict()))
    assert stored["overrides"] == {"mem-fraction-static": 0.8, "cuda-graph-max-bs": 128}
    again = to_plan(stored).overrides
    assert again == plan.overrides and again.given("cuda-graph-max-bs") == "cuda-graph-max-bs=128"
    retried = again.merged(parse_sets(["cuda-graph-max-bs=0x10"]))
    assert list(retried) == ["mem-fraction-static", "cuda-graph-max-bs"]
    assert retried.given("cuda-graph-max-bs") == "cuda-graph-max-bs=0x10"
    assert retried.given("mem-fraction-static") == "mem-fraction-static=0.8"


def test_unknown_knob_suggests(preset: Preset) -> None:
    with pytest.raises(KnobError) as info:
        resolve(preset, overrides={"mem-fraction-statc": 0.8})
    message = str(info.value)
    assert "unknown knob 'mem-fraction-statc'" in message
    assert "did you mean 'mem-fraction-static'" in message
    assert "\n" not in message


def test_non_overridable_knob(preset: Preset) -> None:
    with pytest.raises(KnobError, match=r"'tp-size' is not overridable.*overridable: mem-fr"):
        resolve(preset, overrides={"tp-size": 4})
    with pytest.raises(KnobError, match="'NCCL_ALGO' is not overridable"):
        resolve(preset, overrides={"NCCL_ALGO": "Ring"})


def test_reps_and_queue(preset: Preset) -> None:
    with pytest.raises(UserError, match="--reps"):
        resolve(preset, reps=0)
    plan = resolve(preset, reps=1, queue="gpu-a")
    assert plan.reps == 1 and plan.queue == "gpu-a"
    assert resolve(preset, default_queue="q2").queue == "q2"


def test_plan_round_trips_through_json(preset: Preset) -> None:
    plan = resolve(preset, overrides={"mem-fraction-static": 0.8})
    again = to_plan(json.loads(json.dumps(plan.to_dict())))
    assert again == plan
    with pytest.raises(UserError, match="no approach 'zz'"):
        plan.config("zz")


def test_confounds_name_both_values() -> None:
    found = confounds(
        server_args={"a": 1, "b": 0.8, "c": True},
        env={"X": "1"},
        change={"server_args": {"c": True}, "env": {}},
        base_args={"a": 1.0, "b": 0.85},
        base_env={},
    )
    # 1 == 1.0 is no difference; c is declared; b and X are confounds
    assert found == [("b", "0.8", "0.85"), ("X", "1", "unset")]


def test_confounds_never_show_a_secret_env_value() -> None:
    found = confounds(
        server_args={}, env={"HF_TOKEN": "hf_secret_value", "NCCL_ALGO": "Tree"},
        change={"server_args": {}, "env": {}}, base_args={}, base_env={"HF_TOKEN": "hf_other"},
    )
    assert found == [("HF_TOKEN", "***", "***"), ("NCCL_ALGO", "Tree", "unset")]
