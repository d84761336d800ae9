"""Where specbench and the real releases disagreed in small ways (issue 32, item 7), through the
CLI on the stand-ins: vLLM 0.33's other words for a GPU too old for a quantization and for too
little memory at start, the bench module SGLang 0.5.15 moved, each release's own reading of an
abbreviated flag, and the sampling each bench client sends, recorded and compared."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.bot.test_vllm_surfaces import BENCH, REPO, by_approach, specbench

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
    assert "on startup is less than the engine's budget" in results["external-weights"]["why"]


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
    site: Path, tmp_path: Path,
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
    done = specbench(site, "run", str(preset), STANDIN_VERSION="0.5.19",
                     SPECBENCH_DATA_DIR=str(tmp_path / "data"))
    assert done.returncode == 2, done.stderr
    assert AMBIGUOUS in done.stderr and len(done.stderr.strip().splitlines()) == 1


def sglang_preset(name: str, info: Path, bench: str = SGLANG_BENCH) -> str:
    return f"""\
name: {name}
engine: sglang
reps: 1
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

