"""The newcomer's demo (issue 21 item 4), as `make demo` runs it: `specbench run cpu-demo` twice
in a row, each in a data dir of its own, and the verdicts of the two compared approach by
approach (the sweep's points are left out: Optuna chooses them from what it measures; its
confirmed outcome is compared instead). Each run is also a whole batch of the real local engine
(a tiny Llama through transformers, forked from its warm server), start to report. The demo's
second half, cpu-loads, has a file of its own (test_cpu_loads_demo.py) so that the two pairs
of runs, minutes each, go to different pytest-xdist workers."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.bench.bench_demo import SPECBENCH, verdicts

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def demo(data: Path, preset: str = "cpu-demo") -> tuple[dict[str, Any], str]:
    """The JSON report of `specbench run PRESET` with `data` as its data dir, and its progress
    (stderr); the environment is this process's without any SPECBENCH_ or STANDIN_ knob, as a
    newcomer's shell has it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECBENCH_", "STANDIN_"))}
    env["SPECBENCH_DATA_DIR"] = str(data)
    done = subprocess.run([str(SPECBENCH), "run", preset, "--format", "json"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout), done.stderr


@pytest.mark.timeout(900)
def test_two_consecutive_demos_give_the_same_verdict_for_every_approach(tmp_path: Path) -> None:
    report, progress = demo(tmp_path / "first")
    first = verdicts(report)
    second = verdicts(demo(tmp_path / "second")[0])
    assert first == second
    assert first["prompt-lookup"] == "improved"
    assert first["sweep winner's confirmation"] == "improved"
    assert "confirmation" in progress  # every step is visible while it runs, the confirmation too
