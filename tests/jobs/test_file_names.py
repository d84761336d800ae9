"""Long names never crash a batch (issue 32, item 3): a legitimate sweep over eight long env knobs
names points no file system takes as file names (`OSError: [Errno 36] File name too long`); the
files of a configuration are named by `file_stem`, bounded and unique. An over-long approach name
is bad input at plan time (the catalogue: tests/bad_inputs.yaml).

The sweep runs through the real `specbench run` on the SGLang stand-in (tests/standin/): what
it holds is the file names, which every engine takes from `file_stem`, not the engine's model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.core.file_names import MAX_STEM_BYTES, file_stem
from jobs.core.sweeps import point_name
from tests.standin.harness import Standin, make_standin

REPO = Path(__file__).resolve().parents[2]
KNOBS = [f"MY_VERY_LONG_ENVIRONMENT_KNOB_NAME_NUMBER_{i}" for i in range(8)]

ENVSWEEP = """\
name: envsweep
description: eight env knobs swept together on the SGLang stand-in
engine: sglang
metric: output_throughput
reps: 1
warmup: false
timeouts: {{startup_s: 60, bench_s: 30}}
bench: {{dataset-name: random-ids, random-input-len: 8, random-output-len: 4,
        random-range-ratio: 1.0, num-prompts: 1}}
baseline:
  server_args: {{model-path: /models/tiny-llama, tp-size: 1}}
  env: {{STANDIN_STARTUP_S: "0.05", STANDIN_HEALTH_S: "0.02"}}
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


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Standin]:
    setup = make_standin(tmp_path, monkeypatch)
    yield setup
    setup.assert_clean()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_sweep_over_eight_long_env_knobs_runs_to_its_end(tmp_path: Path,
                                                          standin: Standin) -> None:
    grid = "\n".join(f"    {knob}: ['on']" for knob in KNOBS)
    path = tmp_path / "envsweep.yaml"
    path.write_text(ENVSWEEP.format(grid=grid))
    # the stand-in's interpreter and path (make_standin), its tag for the leak check
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SPECBENCH_") or k == "SPECBENCH_SGLANG_PYTHON"}
    env.update(SPECBENCH_DATA_DIR=str(tmp_path / "data"),
               PYTHONPATH=os.pathsep.join([env["PYTHONPATH"], str(REPO)]),
               STANDIN_INFO_FILE=str(standin.info_file), STANDIN_TAG=standin.tag)
    done = subprocess.run([sys.executable, "-m", "bot.cli.main", "run", str(path), "--format",
                           "json"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    (point,) = [r for r in report["results"] if r["approach"].startswith("envsweep@")]
    assert len(point["approach"]) > 255  # longer than any file name
    assert point["verdict"] not in ("failed", "skipped"), point
    # the sweep batch's own logs (a confirmation, when its point beat the baseline by noise,
    # has a folder of its own): each configuration's server log and, on SGLang, its bench
    # client's log, both named by its stem
    folder = tmp_path / "data" / "logs" / report["batch"]
    logs = sorted(p.name for p in folder.glob("*.log"))
    stems = ["baseline", file_stem(point["approach"])]
    assert logs == sorted([f"{s}{kind}.log" for s in stems for kind in ("", ".bench")]), logs
    assert "File name too long" not in done.stderr
    # the stand-in's servers ran it (the fixture's leak check finds none of them left)
    assert standin.notes("server")
