"""Where specbench and the real releases disagreed in small ways (issue 32, item 7), through the
CLI on the stand-ins: vLLM 0.33's other words for a GPU too old for a quantization and for too
little memory at start, the bench module SGLang 0.5.15 moved, each release's own reading of an
abbreviated flag, and the sampling each bench client sends, recorded and compared.

The batches run through the real `specbench` command, each in a process of its own; what only
reads the store afterwards (`show`, `compare`) and the preset refused before anything runs call
`bot.cli.main.main` in this process, with the environment the command would have had (`here`)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.bot.test_vllm_surfaces import BENCH, REPO, by_approach, environment, specbench
from tests.builders import specbench_here_as

FAILING = {  # approach -> (STANDIN_FATAL, the cause its line gives)
    "compressed-tensors": ("quant-min", "arch-unsupported"),
    "exact-capability": ("quant-exact", "arch-unsupported"),
    "quark": ("quant-quark", "arch-unsupported"),
    "external-weights": ("startup-memory-external", "out-of-memory"),
}
VQUIRKS = f"""\
name: vquirks
engine: vllm
reps: 1
warmup: false
timeouts: {{startup_s: 20, bench_s: 20}}
bench: {BENCH}
baseline:
  server_args: {{model: /models/tiny}}
  env: {{STANDIN_STARTUP_S: "0.1"}}
approaches:
""" + "".join(
    f"  - name: {name}\n    hypothesis: dies the release's way\n"
    f"    env: {{STANDIN_MODE: crash, STANDIN_FATAL: {kind}}}\n"
    for name, (kind, _) in FAILING.items())


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("release-details")
    shutil.copytree(REPO / "config", root / "config")
    (root / "config" / "presets" / "vquirks.yaml").write_text(VQUIRKS)
    return root


Here = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def here(capsys: pytest.CaptureFixture[str]) -> Here:
    """`specbench(site, ARGS)` in this process (tests/builders.py `specbench_here`): the
    environment and working folder its subprocess gets, while it runs."""
    return specbench_here_as(capsys, environment, REPO)


def run_json(site: Path, preset: str, **env: str) -> dict[str, Any]:
    done = specbench(site, "run", preset, "--format", "json", **env)
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_vllm_s_other_words_for_an_old_gpu_and_short_memory_name_their_cause(
    site: Path,
) -> None:
    results = by_approach(run_json(site, "vquirks"))
    for name, (_, cause) in FAILING.items():
        assert (results[name]["verdict"], results[name]["cause"]) == ("failed", cause), name
    assert "current GPU. Min capability: 90." in results["compressed-tensors"]["why"]
    assert "current GPU. Required capability: 100." in results["exact-capability"]["why"]
    assert "current GPU. Min capability: 94." in results["quark"]["why"]
    # the why quotes the line, cut after about 150 characters: the stand-in's figures for this
    # variant (10.5 GiB free) say which line it is
    assert "(10.5/79.19 GiB) on startup is less than" in results["external-weights"]["why"]


SGLANG_BENCH = ("{dataset-name: random-ids, random-input-len: 8, random-output-len: 4, "
                "random-range-ratio: 1.0, num-prompts: 2, max-concurrency: 1}")
ABBREVIATED = f"""\
name: sabbrev
engine: sglang
reps: 1
warmup: false
timeouts: {{startup_s: 20, bench_s: 20}}
bench: {SGLANG_BENCH}
baseline:
  server_args: {{model-path: /models/tiny, tp: 1}}
approaches:
  - name: data-parallel
    hypothesis: dp is --dp-size to the release's parser
    server_args: {{dp: 1}}
  - name: pipeline
    hypothesis: pp is ambiguous to it
    server_args: {{pp: 1}}
"""
AMBIGUOUS = ("ambiguous option: --pp could match --pp-async-batch-depth, "
             "--pp-max-micro-batch-size, --pp-size")


def test_sglang_preflight_reads_an_abbreviated_flag_as_the_release_s_parser_does(
    site: Path, tmp_path: Path, here: Here,
) -> None:
    (site / "config" / "presets" / "sabbrev.yaml").write_text(ABBREVIATED)
    report = run_json(site, "sabbrev", STANDIN_VERSION="0.5.19")
    assert report["baseline"]["status"] == "ok" and report["baseline"]["value"] is not None
    results = by_approach(report)
    assert results["data-parallel"]["verdict"] != "failed"
    assert (results["pipeline"]["verdict"], results["pipeline"]["cause"]) == (
        "failed", "bad-config")
    assert AMBIGUOUS in results["pipeline"]["why"]
    preset = tmp_path / "spp.yaml"
    preset.write_text(ABBREVIATED.replace("name: sabbrev", "name: spp")
                      .replace("tp: 1}", "pp: 1}", 1))
    done = here(site, "run", str(preset), STANDIN_VERSION="0.5.19",
                     SPECBENCH_DATA_DIR=str(tmp_path / "data"))
    assert done.returncode == 2, done.stderr
    assert AMBIGUOUS in done.stderr and len(done.stderr.strip().splitlines()) == 1


def sglang_preset(name: str, info: Path, bench: str = SGLANG_BENCH) -> str:
    # two repetitions: its verdicts are asserted, and one is no noise estimate
    return f"""\
name: {name}
engine: sglang
reps: 2
warmup: false
timeouts: {{startup_s: 20, bench_s: 20}}
bench: {bench}
baseline:
  server_args: {{model-path: /models/tiny, tp-size: 1}}
  env: {{STANDIN_INFO_FILE: "{info}"}}
approaches:
  - name: faster
    hypothesis: more tokens per second
    env: {{STANDIN_THROUGHPUT: "95"}}
"""


def notes(info: Path, role: str) -> list[dict[str, Any]]:
    entries = [json.loads(line) for line in info.read_text().splitlines()]
    return [e for e in entries if e["role"] == role]


def bench_logs(site: Path, batch: str) -> str:
    return "".join(p.read_text() for p in sorted((site / "data" / "logs" / batch).glob(
        "*.bench.log")))


def test_sglang_s_bench_runs_as_the_module_its_release_has(site: Path, tmp_path: Path) -> None:
    # 0.5.15 moved it to sglang.benchmark.serving and left a shim that warns; 0.5.9 has only
    # sglang.bench_serving
    for version, module in (("0.5.19", "sglang.benchmark.serving"),
                            ("0.5.9", "sglang.bench_serving")):
        info = tmp_path / f"info-{version}.jsonl"
        name = f"smodule{version.replace('.', '')}"
        (site / "config" / "presets" / f"{name}.yaml").write_text(sglang_preset(name, info))
        report = run_json(site, name, STANDIN_VERSION=version)
        assert by_approach(report)["faster"]["verdict"] == "improved"
        assert {n["module"] for n in notes(info, "bench")} == {module}, version
        logs = bench_logs(site, report["batch"])
        assert "Serving Benchmark Result" in logs and "FutureWarning" not in logs


def vllm_preset(name: str, info: Path, bench: str = BENCH) -> str:
    return f"""\
name: {name}
engine: vllm
reps: 1
warmup: false
timeouts: {{startup_s: 20, bench_s: 20}}
bench: {bench}
baseline:
  server_args: {{model: /models/tiny}}
  env: {{STANDIN_STARTUP_S: "0.1", STANDIN_INFO_FILE: "{info}"}}
approaches:
  - name: faster
    hypothesis: more tokens per second
    env: {{STANDIN_THROUGHPUT: "95"}}
"""


def sampled_run(here: Here, site: Path, name: str, preset: str, info: Path,
                **env: str) -> dict[str, Any]:
    """The batch's report, after checking that each of its records names the sampling its
    requests carried, as the stand-in server saw them."""
    (site / "config" / "presets" / f"{name}.yaml").write_text(preset)
    report = run_json(site, name, **env)
    shown = here(site, "show", report["batch"], "--format", "jsonl")
    records = [json.loads(line) for line in shown.stdout.splitlines()]
    assert {json.dumps(r["sampling"]) for r in records} == {json.dumps(report["sampling"])}
    (seen,) = {json.dumps(n["sampling"], sort_keys=True) for n in notes(info, "sampling")}
    received = json.loads(seen)
    if received.get("repetition_penalty") == 1.0 and report["engine"]["name"] == "vllm":
        del received["repetition_penalty"]  # bench serve's fixed no-penalty: not a choice made
    assert {"temperature": None, **received} == report["sampling"]
    return report


def test_each_record_names_its_sampling_and_compare_names_a_difference(
    site: Path, tmp_path: Path, here: Here,
) -> None:
    sglang = sampled_run(here, site, "ssample", sglang_preset("ssample", tmp_path / "s.jsonl"),
                         tmp_path / "s.jsonl", STANDIN_VERSION="0.5.19")
    assert sglang["sampling"] == {"temperature": 0.0}  # bench_serving's --temperature default
    unpinned = sampled_run(here, site, "vsample", vllm_preset("vsample", tmp_path / "v.jsonl"),
                           tmp_path / "v.jsonl")
    assert unpinned["sampling"] == {"temperature": None}  # 0.33 sends none: the server's default
    pinned = sampled_run(here, site, "vpinned", vllm_preset(
        "vpinned", tmp_path / "p.jsonl", BENCH.replace("}", ", temperature: 0}")),
        tmp_path / "p.jsonl")
    assert pinned["sampling"] == {"temperature": 0.0}
    differ = here(site, "compare", sglang["batch"], unpinned["batch"], "--format", "json")
    data = json.loads(differ.stdout)
    assert data["sampling"]["changes"] == [{"key": "temperature", "a": 0.0, "b": None}]
    assert ("the batches sampled differently (temperature 0.0 → the server's default): "
            "acceptance and throughput are measured under different sampling") in data["warnings"]
    text = here(site, "compare", sglang["batch"], unpinned["batch"]).stdout
    assert "Sampling: temperature 0.0 → the server's default" in text
    alike = here(site, "compare", sglang["batch"], pinned["batch"]).stdout
    assert "Sampling: the same (temperature 0.0)" in alike
    assert "sampled differently" not in alike


def test_the_shipped_eagle3_presets_pin_their_sampling_alike(
    site: Path, tmp_path: Path, here: Here,
) -> None:
    from jobs.core.plans import load_preset
    from jobs.engines.sglang import bench_client as sglang_client
    from jobs.engines.vllm import bench_client as vllm_client

    sglang, vllm = load_preset("eagle3"), load_preset("eagle3-vllm")
    assert sglang_client.sampling(sglang.bench) == {"temperature": 0.0}
    assert vllm_client.sampling(vllm.bench, "0.33.0") == {"temperature": 0.0}
    # eagle3's pin on a release whose bench_serving has no --temperature (before 0.5.14): the
    # value its client sends anyway, so the batch runs and records it
    pinned = SGLANG_BENCH.replace("}", f", temperature: {sglang.bench['temperature']}}}")
    report = sampled_run(here, site, "sold", sglang_preset("sold", tmp_path / "o.jsonl", pinned),
                         tmp_path / "o.jsonl", STANDIN_VERSION="0.5.9")
    assert report["sampling"] == {"temperature": 0.0}
    assert by_approach(report)["faster"]["verdict"] == "improved"


def test_sampling_given_through_a_client_s_extra_body_is_what_the_record_names(
    site: Path, tmp_path: Path, here: Here,
) -> None:
    # vLLM: --extra-body's keys win over the flags; SGLang: a `sampling_params` in
    # --extra-request-body replaces the client's own (both checked against what the server got)
    extra = """, temperature: 0, extra-body: '{"temperature": 0.6, "top_p": 0.9}'}"""
    vllm = sampled_run(here, site, "vextra", vllm_preset("vextra", tmp_path / "v.jsonl",
                                                   BENCH.replace("}", extra)), tmp_path / "v.jsonl")
    assert vllm["sampling"] == {"temperature": 0.6, "top_p": 0.9}
    body = '{"sampling_params": {"temperature": 0.7, "max_new_tokens": 4, "ignore_eos": true}}'
    bench = SGLANG_BENCH.replace("}", f", extra-request-body: '{body}'}}")
    sglang = sampled_run(here, site, "sextra", sglang_preset("sextra", tmp_path / "s.jsonl", bench),
                         tmp_path / "s.jsonl", STANDIN_VERSION="0.5.19")
    assert sglang["sampling"] == {"temperature": 0.7}
