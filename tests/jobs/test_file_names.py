"""Long names never crash a batch (issue 32, item 3): a legitimate sweep over eight long env knobs
names points no file system takes as file names (`OSError: [Errno 36] File name too long`); the
files of a configuration are named by `file_stem`, bounded and unique. An over-long approach name
is bad input at plan time (the catalogue: tests/bad_inputs.yaml).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.core.file_names import MAX_STEM_BYTES, file_stem
from jobs.core.sweeps import point_name

REPO = Path(__file__).resolve().parents[2]
KNOBS = [f"MY_VERY_LONG_ENVIRONMENT_KNOB_NAME_NUMBER_{i}" for i in range(8)]

ENVSWEEP = """\
name: envsweep
description: eight env knobs swept together on the CPU
engine: local
metric: output_throughput
reps: 1
warmup: false
timeouts: {{startup_s: 120, bench_s: 60}}
bench: {{num-prompts: 1, input-len: 8, output-len: 4}}
baseline:
  server_args: {{hidden-size: 64, num-layers: 2, num-heads: 4, vocab-size: 256, seed: 0,
                threads: 1}}
sweep:
  name: envsweep
  grid:
{grid}
  confirm_reps: 1
"""


def test_a_plain_short_name_is_its_own_stem() -> None:
    for name in ("baseline", "eagle3-nccl-tree", "graph-bs@cuda-graph-max-bs=128,mem=0.85"):
        assert file_stem(name) == name


@pytest.mark.parametrize("name", [
    "a" * 5000, "x" * (MAX_STEM_BYTES + 1), "lookup@dir=/tmp/evil", "../../etc/passwd",
    "sp ace", ".hidden", "ünïcödé" * 40, "nul\x00byte",
])
def test_any_name_gets_a_bounded_safe_stem(name: str) -> None:
    stem = file_stem(name)
    assert len(stem.encode()) <= MAX_STEM_BYTES
    assert "/" not in stem and "\x00" not in stem and not stem.startswith(".")
    assert stem == file_stem(name)  # the same name, the same file (a resumed run finds it)


def test_names_that_share_a_prefix_or_their_safe_form_keep_their_own_files() -> None:
    long = "p" * 300
    names = [long + "a", long + "b", "a/b", "a_b", "a b",
             point_name("envsweep", {k: "on" for k in KNOBS}),
             point_name("envsweep", {k: "off" for k in KNOBS})]
    stems = [file_stem(n) for n in names]
    assert len(set(stems)) == len(names), stems


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_sweep_over_eight_long_env_knobs_runs_to_its_end(tmp_path: Path) -> None:
    grid = "\n".join(f"    {knob}: ['on']" for knob in KNOBS)
    path = tmp_path / "envsweep.yaml"
    path.write_text(ENVSWEEP.format(grid=grid))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECBENCH_")}
    env.update(SPECBENCH_DATA_DIR=str(tmp_path / "data"), PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "bot.cli.main", "run", str(path), "--format",
                           "json"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    (point,) = [r for r in report["results"] if r["approach"].startswith("envsweep@")]
    assert len(point["approach"]) > 255  # longer than any file name
    assert point["verdict"] not in ("failed", "skipped"), point
    # the sweep batch's own logs (a confirmation, when its point beat the baseline by noise,
    # has a folder of its own)
    folder = tmp_path / "data" / "logs" / report["batch"]
    logs = sorted(p.name for p in folder.glob("*.log"))
    assert logs == sorted(["baseline.log", f"{file_stem(point['approach'])}.log"]), logs
    assert "File name too long" not in done.stderr
