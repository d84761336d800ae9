"""Advice that can be right (issue 14, item 2): `accept` names a measured configuration or is
left out, and remedies fit what the batch ran (engine, GPUs, the flag the engine rejected)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jobs.core.advice import Remedies, analyze, engine_of, load_remedies, parallelism
from jobs.core.records import RunRecord
from jobs.core.rules import load_rules
from jobs.core.verdicts import Metric
from jobs.engines.sglang.flag_table import load_table
from jobs.errors import PresetError
from tests.conftest import make_record

CPU = {"gpu": "none (CPU: Test CPU)", "gpu_count": 0, "compute_capability": None,
       "interconnect": None, "driver": None, "cuda": None, "torch": "2.8.0", "sglang": None,
       "nccl": None, "cpu": "Test CPU", "cpu_cores": 16}
CPU_ARGS = {"hidden-size": 64, "num-layers": 4, "num-heads": 4, "vocab-size": 1024, "seed": 0,
            "threads": 1}
SGLANG_1 = {"gpu": "NVIDIA H200", "gpu_count": 1, "compute_capability": "9.0",
            "interconnect": None, "driver": "575.57.08", "cuda": "12.8", "torch": "2.8.0",
            "sglang": "0.5.2", "nccl": "2.27.3"}
EAGLE = {"speculative-algorithm": "EAGLE3", "speculative-num-steps": 3}
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
STOP = "stop optimising"


def report_of(records: list[RunRecord], **kwargs: Any) -> dict[str, Any]:
    return analyze(records, metric=Metric(), rules=load_rules(), remedies=load_remedies(),
                   **kwargs)


def steps_of(report: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [s for s in report["next_steps"] if s["kind"] == kind]


def all_text(report: dict[str, Any]) -> str:
    return "\n".join(f"{s['action']} — {s['why']}" for s in report["next_steps"])


def cpu(name: str, **kwargs: Any) -> RunRecord:
    """A record of the local CPU engine (its fingerprint, its knobs)."""
    change = kwargs.pop("change", None) or {}
    args = {**CPU_ARGS, **change.get("server_args", {})}
    return make_record(name, fingerprint=CPU, server_args=args, change=change, **kwargs)


# --------------------------------------------------------------------------- accept


def test_an_all_failed_batch_offers_no_accept_and_no_stop_optimising() -> None:
    report = report_of([
        make_record("baseline", status="failed", samples=[], log_tail=OOM),
        make_record("a", status="failed", samples=[], log_tail=OOM),
        make_record("b", status="failed", samples=[], log_tail="Segmentation fault"),
    ])
    assert steps_of(report, "accept") == []
    assert STOP not in all_text(report).lower()
    assert "no measurement" not in all_text(report)
    assert steps_of(report, "remedy")  # the failures still get their remedies


def test_a_batch_whose_baseline_failed_offers_no_accept() -> None:
    report = report_of([
        make_record("baseline", status="failed", samples=[], log_tail=OOM),
        make_record("a", samples=[110.0, 111.0]),
    ])
    assert steps_of(report, "accept") == []
    assert report["next_steps"][0]["action"].startswith("Fix the baseline")


def test_a_cancelled_batch_offers_no_accept_but_a_rerun() -> None:
    report = report_of([
        make_record("baseline", status="cancelled", samples=[]),
        make_record("a", status="skipped", samples=[]),
        make_record("b", status="skipped", samples=[]),
    ])
    assert steps_of(report, "accept") == []
    assert [(s["kind"], s["action"]) for s in report["next_steps"]] == [
        ("retry", "Run the whole batch again"),
    ]
    assert "cancelled before its baseline was measured" in report["next_steps"][0]["why"]


def test_a_batch_cancelled_after_its_baseline_keeps_it_without_stop_optimising() -> None:
    report = report_of([
        make_record("baseline", samples=[100.0, 101.0]),
        make_record("same", samples=[100.0, 101.0]),
        make_record("late", status="cancelled", samples=[], parent="same"),
    ])
    retry = steps_of(report, "retry")
    assert len(retry) == 1 and retry[0]["approach"] == "late"
    assert "late (with its parent same)" in retry[0]["action"]
    accept = report["next_steps"][-1]
    assert accept["kind"] == "accept" and accept["approach"] == "baseline"
    assert accept["action"] == "Keep baseline (100.5 tok/s) until a next step beats it"
    assert STOP not in all_text(report).lower()


def test_a_baseline_alone_measured_is_kept_without_stop_optimising() -> None:
    """SPEC: accept is offered whenever a configuration was measured; with every approach
    failed it keeps the baseline until a remedy beats it, and never says stop."""
    report = report_of([
        make_record("baseline", samples=[100.0, 101.0]),
        make_record("a", status="failed", samples=[], log_tail=OOM),
    ])
    accept = report["next_steps"][-1]
    assert accept["kind"] == "accept" and accept["approach"] == "baseline"
    assert accept["action"] == "Keep baseline (100.5 tok/s) until a next step beats it"
    assert STOP not in all_text(report).lower()


def test_accept_names_the_key_achievement_with_its_value_and_unit() -> None:
    report = report_of([
        make_record("baseline", samples=[100.0, 101.0]),
        make_record("fast", samples=[120.0, 121.0]),
        make_record("broken", status="failed", samples=[], log_tail=OOM),
    ])
    accept = report["next_steps"][-1]
    assert accept["kind"] == "accept" and accept["approach"] == "fast"
    assert "fast (120.5 tok/s)" in accept["action"]
    # a cheap remedy is still open, so the step does not claim the search is over
    assert accept["action"].startswith("Keep") and STOP not in accept["why"]


def test_stop_optimising_only_when_every_open_step_is_high_effort() -> None:
    report = report_of([
        make_record("baseline", samples=[100.0, 101.0]),
        make_record("eagle3", samples=[60.0, 61.0], accept_length=2.6,
                    change={"server_args": EAGLE}),
    ])
    remedies = steps_of(report, "remedy")
    assert remedies and {s["effort"] for s in remedies} == {"high"}
    accept = report["next_steps"][-1]
    assert accept["action"].startswith("Accept baseline (100.5 tok/s)")
    assert STOP in accept["why"]


def test_the_seed_session_keeps_its_key_achievement(seed_records: list[RunRecord]) -> None:
    report = report_of(seed_records)
    accept = report["next_steps"][-1]
    assert accept["approach"] == "cuda-graph-max-bs-128"
    assert accept["action"] == "Keep cuda-graph-max-bs-128 (89.5 tok/s) until a next step beats it"
    retry = report["next_steps"][0]
    assert "eagle3-nccl-fewer-channels (with its parent eagle3)" in retry["action"]


# --------------------------------------------------------------------------- bad-config


def bad_config(log: str, *, flags: bool = True, **kwargs: Any) -> list[dict[str, Any]]:
    report = report_of(
        [make_record("baseline", samples=[100.0, 101.0]),
         make_record("x", status="failed", samples=[], log_tail=f"starting\n{log}\n", **kwargs)],
        flags=load_table() if flags else None,
    )
    assert report["results"][0]["cause"] == "bad-config"
    return [s for s in steps_of(report, "remedy") if s["cause"] == "bad-config"]


def test_a_renamed_flag_is_named_as_such() -> None:
    steps = bad_config("launch_server.py: error: unrecognized arguments: "
                       "--cuda-graph-max-bs-decode 128")
    assert len(steps) == 1
    assert steps[0]["action"] == "Spell --cuda-graph-max-bs-decode as --cuda-graph-max-bs in x"
    assert "renamed" in steps[0]["why"] and "one-line fix" in steps[0]["why"]


def test_a_value_outside_the_vocabulary_is_not_called_a_renamed_flag() -> None:
    steps = bad_config("launch_server.py: error: argument --attention-backend: invalid choice: "
                       "'nope' (choose from 'flashinfer', 'triton', 'torch_native')")
    assert len(steps) == 1
    text = steps[0]["action"] + steps[0]["why"]
    assert "renamed" not in text and "one-line fix" not in text
    assert "--attention-backend" in text and "'nope'" in text
    assert "'flashinfer', 'triton', 'torch_native'" in text


def test_a_renamed_flag_and_a_bad_value_get_different_remedies() -> None:
    renamed = bad_config("launch_server.py: error: unrecognized arguments: "
                         "--cuda-graph-max-bs-decode 128")
    value = bad_config("launch_server.py: error: argument --tp-size: invalid int value: 'abc'")
    assert renamed[0]["action"] != value[0]["action"]
    assert "'abc'" in value[0]["action"] and "renamed" not in value[0]["why"]


def test_a_value_newer_than_the_release_says_which_release_has_it() -> None:
    steps = bad_config("launch_server.py: error: argument --moe-a2a-backend: invalid choice: "
                       "'flashinfer' (choose from 'none', 'deepep')")
    assert len(steps) == 1
    assert "is in SGLang 0.5.9 and later; this is 0.5.2" in steps[0]["action"]


def test_an_unknown_flag_keeps_the_engines_suggestion() -> None:
    steps = bad_config("launch_server.py: error: unrecognized arguments: --tp-sise 8 "
                       "(did you mean --tp-size?)")
    assert len(steps) == 1
    text = steps[0]["action"] + steps[0]["why"]
    assert "--tp-sise" in text and "did you mean --tp-size?" in text
    assert "renamed flag is" not in text and "launch_server --help" in text


def test_without_the_flag_table_no_flag_is_called_renamed() -> None:
    steps = bad_config("launch_server.py: error: unrecognized arguments: "
                       "--cuda-graph-max-bs-decode 128", flags=False)
    assert len(steps) == 1 and "renamed" not in steps[0]["why"]


def test_a_vocabulary_mismatch_on_the_cpu_engine_is_a_conflict_of_settings() -> None:
    line = ("ValueError: --draft-vocab-size 2048 and --vocab-size 1024 cannot be used together: "
            "assisted decoding needs a draft that shares the target's vocabulary")
    report = report_of([
        cpu("baseline", samples=[100.0, 101.0]),
        cpu("draft-own-vocab", status="failed", samples=[], log_tail=f"loading\n{line}\n",
            change={"server_args": {"draft-layers": 1, "draft-vocab-size": 2048}}),
    ])
    steps = [s for s in steps_of(report, "remedy") if s["cause"] == "bad-config"]
    assert len(steps) == 1
    text = steps[0]["action"] + steps[0]["why"]
    assert "conflicting settings" in text and "--draft-vocab-size 2048" in text
    assert "renamed" not in text and "one-line fix" not in text
    assert "launch_server" not in text


def test_a_bad_flag_on_the_cpu_engine_points_to_its_own_flags() -> None:
    report = report_of([
        cpu("baseline", samples=[100.0, 101.0]),
        cpu("x", status="failed", samples=[], log_tail="local_child: error: unrecognized "
            "arguments: --draft-layer 1 (did you mean --draft-layers?)"),
    ])
    steps = [s for s in steps_of(report, "remedy") if s["cause"] == "bad-config"]
    assert len(steps) == 1 and "jobs.engines.local.child --help" in steps[0]["action"]
    assert "SGLang" not in steps[0]["action"]


# --------------------------------------------------------------------------- by what ran


def speculative_regression(records: list[RunRecord]) -> str:
    report = report_of(records)
    assert [r["verdict"] for r in report["results"]] == ["regressed"]
    return "\n".join(s["action"] for s in steps_of(report, "remedy"))


def test_a_cpu_engines_speculative_regression_gets_no_all_reduce_advice() -> None:
    text = speculative_regression([
        cpu("baseline", samples=[879.0, 880.0]),
        cpu("draft-1-layer", samples=[459.0, 460.0], accept_length=1.8,
            change={"server_args": {"draft-layers": 1}}),
    ])
    assert "all-reduce" not in text and "collective" not in text
    assert "draft-layers" in text and "drafter training" not in text


def test_a_tp8_sglang_speculative_regression_still_gets_it() -> None:
    text = speculative_regression([
        make_record("baseline", samples=[100.0, 101.0]),
        make_record("eagle3", samples=[60.0, 61.0], accept_length=2.6,
                    change={"server_args": EAGLE}),
    ])
    assert "coalesce all-reduces" in text


def test_a_single_gpu_sglang_regression_gets_per_cycle_advice_not_all_reduces() -> None:
    args = {"model-path": "/models/m", "tp-size": 1}
    text = speculative_regression([
        make_record("baseline", samples=[100.0, 101.0], fingerprint=SGLANG_1, server_args=args),
        make_record("eagle3", samples=[60.0, 61.0], accept_length=2.6, fingerprint=SGLANG_1,
                    change={"server_args": EAGLE}, server_args={**args, **EAGLE}),
    ])
    assert "all-reduce" not in text and "--speculative-num-steps" in text


def test_out_of_memory_on_the_cpu_engine_names_its_own_knobs() -> None:
    report = report_of([
        cpu("baseline", samples=[100.0, 101.0]),
        cpu("big", status="failed", samples=[], log_tail="torch.OutOfMemoryError: not enough "
            "memory: you tried to allocate 123456789 bytes."),
    ])
    assert report["results"][0]["cause"] == "out-of-memory"
    text = all_text(report)
    assert "mem-fraction-static" not in text and "tp-size" not in text
    assert "hidden-size" in text


def test_the_plans_engine_decides_over_the_fingerprint() -> None:
    records = [
        make_record("baseline", samples=[100.0, 101.0]),
        make_record("big", status="failed", samples=[], log_tail=OOM),
    ]
    assert "mem-fraction-static" in all_text(report_of(records))
    assert "mem-fraction-static" not in all_text(report_of(records, engine="local"))


@pytest.mark.parametrize(("fingerprint", "engine"), [
    (CPU, "local"), ({"gpu": "none", "gpu_count": 0}, "local"), (SGLANG_1, "sglang"),
    ({"gpu": "NVIDIA H200", "gpu_count": 1}, "sglang"),
])
def test_the_engine_from_a_fingerprint(fingerprint: dict[str, Any], engine: str) -> None:
    assert engine_of(fingerprint) == engine


def test_parallelism_reads_every_spelling() -> None:
    assert parallelism({"tp-size": 1}) == 1
    assert parallelism({"tp_size": 2, "ep-size": 8}) == 8
    assert parallelism({"--dp": "4"}) == 4
    assert parallelism({"tp-size": "x"}) == 1


# --------------------------------------------------------------------------- the file


def write_remedies(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "remedies.yaml"
    path.write_text(text)
    return path


def test_the_first_format_still_loads(tmp_path: Path) -> None:
    remedies = load_remedies(write_remedies(tmp_path, (
        "verdicts:\n  regressed:\n    - when: speculative\n      action: Cut {approaches}\n"
        "      effort: high\n      why: because\n")))
    remedy = remedies.for_verdict("regressed")[0]
    assert remedy.when.speculative is True and remedy.when.engine is None


@pytest.mark.parametrize(("text", "match"), [
    ("causes:\n  crash:\n    - action: Do {nonsense}\n      effort: low\n      why: w\n",
     r"key 'causes.crash.0': action: unknown placeholder \{nonsense\}"),
    ("causes:\n  crash:\n    - action: a\n      effort: low\n      why: w\n"
     "      when: {engine: tgi}\n", r"key 'causes.crash.0.when.engine': unknown engine 'tgi'"),
    ("causes:\n  crash:\n    - action: a\n      effort: low\n      why: w\n"
     "      when: {gpus: 2}\n", r"key 'causes.crash.0.when.gpus'"),
])
def test_a_bad_remedy_names_its_key(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(PresetError, match=match):
        load_remedies(write_remedies(tmp_path, text))


def test_every_shipped_placeholder_renders(seed_records: list[RunRecord]) -> None:
    shipped: Remedies = load_remedies()
    assert shipped.causes["bad-config"] and shipped.verdicts["regressed"]
    text = all_text(report_of(seed_records))
    assert "{" not in text and "\x00" not in text
