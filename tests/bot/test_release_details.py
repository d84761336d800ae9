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
