"""Load levels through the real `specbench run` on the stand-in SGLang (issue 23, "Must show"):
one server per configuration whatever the number of levels, and EAGLE-3 winning at one request
and losing at sixteen is `mixed` with its crossover named."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.builders import standin_preset
from tests.standin.harness import Standin, make_standin

REPO = Path(__file__).resolve().parents[2]


def preset(*, tag: str, info: Path) -> str:
    return standin_preset(
        "levels", description="EAGLE-3 at three load levels on the stand-in", reps=2,
        bench_s=30, bench={"num-prompts": 16, "max-concurrency": None},
        loads={"max-concurrency": [1, 4, 16]}, slo={"p99_ttft_ms": 1000},
        allow_few_samples=True, overridable=None,
        env={"STANDIN_STARTUP_S": "0.2", "STANDIN_TAG": tag, "STANDIN_INFO_FILE": str(info)},
        approaches=[{"name": "eagle3",
                     "hypothesis": "drafting pays while the GPU idles, not once it is busy",
                     "server_args": {"speculative-algorithm": "EAGLE3",
                                     "speculative-draft-model-path": "/models/d"},
                     "env": {"STANDIN_SPEC_GAIN": "0.6"}}],
    )


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Standin]:
    setup = make_standin(tmp_path, monkeypatch)
    yield setup
    setup.assert_clean()


@pytest.mark.timeout(180)
def test_one_server_per_configuration_and_a_mixed_verdict(tmp_path: Path,
                                                          standin: Standin) -> None:
    path = tmp_path / "levels.yaml"
    path.write_text(preset(tag=standin.tag, info=standin.info_file))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((os.environ["PYTHONPATH"], str(REPO)))}
    env.pop("SPECBENCH_BROKER_URL", None)
    done = subprocess.run([sys.executable, "-m", "bot.cli.main", "run", str(path), "--format",
                           "json"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=170)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert len(standin.notes("server")) == 2  # one per configuration, three levels each
    assert len(standin.notes("bench")) == 2 * 3 * (1 + 2)  # a warm-up and 2 reps a level
    (eagle,) = [r for r in report["results"] if r["approach"] == "eagle3"]
    assert eagle["verdict"] == "mixed", eagle
    assert [(e["load"]["max-concurrency"], e["verdict"]) for e in eagle["by_load"]] == [
        (1, "improved"), (4, "improved"), (16, "regressed")]
    assert eagle["crossover"]["text"] == "improved up to max-concurrency 4, regressed from 16"
    assert all(e["slo"] == "met" for e in eagle["by_load"])
    # the stored records, analysed again with the preset's SLO, give the same verdicts
    shown = subprocess.run([sys.executable, "-m", "bot.cli.main", "show", "--format", "jsonl"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    runs = tmp_path / "runs.jsonl"
    runs.write_text(shown.stdout)
    config = tmp_path / "config"
    shutil.copytree(REPO / "config", config)
    (config / "presets" / "levels.yaml").write_text(path.read_text())
    again = subprocess.run([sys.executable, "-m", "bot.cli.main", "analyze", str(runs),
                            "--format", "json"], cwd=tmp_path, capture_output=True, text=True,
                           env={**env, "SPECBENCH_CONFIG_DIR": str(config)}, timeout=60)
    assert again.returncode == 0, again.stderr
    analysed = json.loads(again.stdout)
    assert analysed["slo"] == report["slo"] == {"p99_ttft_ms": 1000.0}
    for ours, theirs in zip(analysed["results"], report["results"], strict=True):
        assert ours["verdict"] == theirs["verdict"]
        assert [e["verdict"] for e in ours["by_load"]] == [e["verdict"] for e in theirs["by_load"]]
