"""The command line as a user meets it: exit codes, one-line errors. What a user runs to get an
answer (`analyze`, `presets`, no command at all) runs as a real subprocess; a refusal runs in this
process (`here`: tests/builders.py `specbench_here`), its stdout, stderr and exit code those the
process would have, for a start-up costs half a second of CPU and the suite is CPU-bound."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobs import settings
from jobs.store import Store
from tests.builders import specbench_here
from tests.conftest import REPO, SEED_VERDICTS, make_record

Here = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def here(capsys: pytest.CaptureFixture[str]) -> Here:
    """`here(ARGS...)`: `specbench ARGS...` in this process, with the test's environment."""
    return lambda *args: specbench_here(capsys, *args)


def specbench(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """`specbench ARGS...` in a fresh interpreter, with the test's (isolated) environment."""
    return subprocess.run(
        [sys.executable, "-m", "bot.cli.main", *args],
        cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
        text=True, timeout=60,
    )


def refused(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit 2, one line on stderr naming the problem, no traceback, nothing on stdout."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def nothing_stored() -> None:
    database = settings.data_dir() / "specbench.db"
    if not database.exists():
        return
    with Store() as store:
        assert store.list_batches() == []


def write_jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- analyze


def test_analyze_the_seed_session_as_json(seed_path: Path) -> None:
    result = specbench("analyze", str(seed_path), "--format", "json")
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    results = {r["approach"]: r for r in report["results"]}
    assert [r["approach"] for r in report["results"]] == [
        "cuda-graph-max-bs-128", "eagle3", "eagle3-nccl-tree", "eagle3-flashinfer-fusion",
        "eagle3-custom-allreduce", "eagle3-torch-symm-mem", "eagle3-ep-flashinfer-a2a",
        "eagle3-nccl-fewer-channels",
    ]
    assert {k: (r["verdict"], r["cause"]) for k, r in results.items()} == SEED_VERDICTS
    best = results["cuda-graph-max-bs-128"]
    assert (best["value"], best["delta_pct"]) == (89.5, 9.1)
    assert report["key_achievement"] == {
        "approach": "cuda-graph-max-bs-128", "value": 89.5, "delta_pct": 9.1,
    }
    fewer = results["eagle3-nccl-fewer-channels"]
    assert "mem-fraction-static" in fewer["why"]
    assert "0.8 " in fewer["why"] + " " and "0.85" in fewer["why"]
    assert fewer["vs_parent"] == {"approach": "eagle3", "delta_pct": 2.4}
    assert fewer["delta_pct"] == -32.4
    root = report["root_cause"]
    assert (root["cause"], root["count"], root["of"]) == ("arch-unsupported", 2, 4)
    assert "compute capability 12.0" in root["text"]
    steps = report["next_steps"]
    assert (steps[0]["rank"], steps[0]["kind"], steps[0]["approach"]) == (
        1, "retry", "eagle3-nccl-fewer-channels",
    )
    assert "mem-fraction-static" in steps[0]["action"] and "0.85" in steps[0]["action"]
    assert steps[1]["kind"] == "adopt"
    remedies = [s["effort"] for s in steps if s["kind"] == "remedy"]
    order = ("low", "medium", "high")
    assert [order.index(e) for e in remedies] == sorted(order.index(e) for e in remedies)
    assert set(remedies) == set(order)
    assert steps[-1]["kind"] == "accept"
    assert results["eagle3"]["break_even"] == {"now_ms": 48.2, "needed_ms": 31.8}
    assert {
        "batch", "preset", "metric", "baseline", "results", "key_achievement", "root_cause",
        "next_steps",
    } <= set(report)
    for result in report["results"]:
        assert {
            "approach", "verdict", "cause", "value", "delta_pct", "why", "vs_parent",
            "break_even",
        } <= set(result)
    nothing_stored()


def test_analyze_text_and_slack(seed_path: Path) -> None:
    text = specbench("analyze", str(seed_path))
    assert text.returncode == 0 and "Key achievement: cuda-graph-max-bs-128" in text.stdout
    slack = specbench("analyze", str(seed_path), "--format", "slack")
    assert slack.returncode == 0
    assert json.loads(slack.stdout)["blocks"][0]["type"] == "header"


def test_analyze_metric_options(tmp_path: Path) -> None:
    runs = write_jsonl(tmp_path / "runs.jsonl", [
        make_record("baseline", samples=[200.0, 201.0], metric="median_ttft_ms").to_json(),
        make_record("fast", samples=[150.0, 151.0], metric="median_ttft_ms").to_json(),
    ])
    result = specbench(
        "analyze", str(runs), "--metric", "median_ttft_ms", "--lower-is-better",
        "--min-effect", "5", "--format", "json",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["metric"] == "median_ttft_ms"
    assert report["results"][0]["verdict"] == "improved"
    assert report["results"][0]["delta_pct"] == pytest.approx(24.9)


def test_analyze_a_malformed_line(tmp_path: Path, here: Here) -> None:
    runs = write_jsonl(tmp_path / "runs.jsonl", [
        make_record("baseline").to_json(), make_record("a").to_json(), '{"batch": "b-test",',
    ])
    refused(here("analyze", str(runs)), "runs.jsonl:3", "not valid JSON")


def test_analyze_a_record_with_a_bad_field(tmp_path: Path, here: Here) -> None:
    bad = json.loads(make_record("a").to_json())
    bad["status"] = "exploded"
    lines = [make_record("baseline").to_json(), json.dumps(bad)]
    runs = write_jsonl(tmp_path / "runs.jsonl", lines)
    refused(here("analyze", str(runs)), "runs.jsonl:2", "'status'")


def test_analyze_a_batch_without_a_baseline(tmp_path: Path, here: Here) -> None:
    runs = write_jsonl(tmp_path / "runs.jsonl", [make_record("a").to_json()])
    refused(here("analyze", str(runs)), "no baseline")


def test_analyze_a_missing_file(tmp_path: Path, here: Here) -> None:
    refused(here("analyze", str(tmp_path / "nope.jsonl")), "nope.jsonl")


def test_analyze_an_empty_file(tmp_path: Path, here: Here) -> None:
    refused(here("analyze", str(write_jsonl(tmp_path / "e.jsonl", []))), "no run records")


def test_bad_arguments_exit_2(tmp_path: Path, here: Here) -> None:
    refused(here("analyze", "x.jsonl", "--format", "html"), "--format")
    refused(here("frobnicate"), "frobnicate")


# --------------------------------------------------------------------------- presets


def test_presets_lists_eagle3_and_its_approaches() -> None:
    result = specbench("presets")
    assert result.returncode == 0, result.stderr
    assert "eagle3 (sglang)" in result.stdout
    for approach in ("baseline", "eagle3-nccl-tree (extends eagle3)", "cuda-graph-max-bs-128",
                     "eagle3-nccl-fewer-channels"):
        assert f"- {approach}" in result.stdout


@pytest.mark.parametrize(
    ("edit", "needles"),
    [
        (lambda t: t + "colour: red\n", ["broken.yaml:", "unknown key 'colour'"]),
        (
            lambda t: t.replace("extends: eagle3\n", "extends: eagle33\n", 1),
            ["broken.yaml:", "extends", "'eagle33'", "did you mean 'eagle3'"],
        ),
        (lambda t: t + "bench: [1, 2\n", ["broken.yaml:", "invalid YAML"]),
    ],
    ids=["unknown-key", "dangling-extends", "invalid-yaml"],
)
def test_a_broken_preset_is_refused(
    config_copy: Path, edit: Any, needles: list[str], request: pytest.FixtureRequest, here: Here,
) -> None:
    text = (config_copy / "presets" / "eagle3.yaml").read_text()
    broken = edit(text).replace("name: eagle3\n", "name: broken\n", 1)
    (config_copy / "presets" / "broken.yaml").write_text(broken)
    commands = [["presets"], ["run", "broken"]]
    if request.node.callspec.id == "dangling-extends":  # and once by path
        commands.append(["run", str(config_copy / "presets" / "broken.yaml")])
    for command in commands:
        refused(here(*command), *needles)
    nothing_stored()


def test_analyze_still_works_beside_a_broken_preset(config_copy: Path, seed_path: Path) -> None:
    (config_copy / "presets" / "eagle3.yaml").write_text("name: eagle3\nbaseline: [\n")
    result = specbench("analyze", str(seed_path), "--format", "json")
    assert result.returncode == 0, result.stderr
    assert "warning" in result.stderr and "Traceback" not in result.stderr
    assert json.loads(result.stdout)["results"][0]["verdict"] == "improved"


# --------------------------------------------------------------------------- run: bad input


RUN_REFUSALS: list[tuple[list[str], list[str]]] = [
    (["run", "eagle"], ["unknown preset 'eagle'", "did you mean 'eagle3'"]),
    (["run", "eagle3", "--set", "mem-fraction-statc=0.8"],
     ["unknown knob 'mem-fraction-statc'", "did you mean 'mem-fraction-static'"]),
    (["run", "eagle3", "--set", "tp-size=4"], ["'tp-size' is not overridable"]),
    (["run", "eagle3", "--reps", "0"], ["--reps"]),
    (["run", "eagle3", "--reps", "many"], ["--reps"]),
    (["run", "eagle3", "--engine", "tpu"], ["--engine"]),
]


def test_run_refuses_bad_input_and_stores_nothing(here: Here) -> None:
    results = [here(*args) for args, _ in RUN_REFUSALS]
    for (args, needles), result in zip(RUN_REFUSALS, results, strict=True):
        try:
            refused(result, *needles)
        except AssertionError as exc:
            raise AssertionError(f"specbench {' '.join(args)}: {exc}") from None
    nothing_stored()


def test_no_command_prints_help_and_exits_2() -> None:
    result = specbench()
    assert result.returncode == 2 and "usage" in result.stderr
