"""Issue 19's lifecycle figure: "seconds from SIGTERM to no server left".

A real `specbench run` (embedded) on the stand-in SGLang is stopped with SIGTERM while its
third configuration's server is up and its benchmark hangs; the figure is the time from the
signal to the moment no process of the batch's process groups is left (the CLI stops them
before it exits), median of RUNS runs. The kill -9 figure is the same for a CLI killed with
SIGKILL, from the kill to the end of the `specbench status` that finds the dead runner and
kills what it left (its interpreter start included).
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from tests.bot.test_lifecycle import PRESET, groups_of, wait_for_the_hanging_server
from tests.conftest import REPO
from tests.standin.harness import STANDIN

RUNS = 3


def _env(root: Path) -> dict[str, str]:
    config = root / "config"
    (config / "presets").mkdir(parents=True)
    for name in ("failure_rules.yaml", "remedies.yaml"):
        (config / name).write_text((REPO / "config" / name).read_text())
    (config / "presets" / "standin-life.yaml").write_text(yaml.safe_dump(PRESET))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STANDIN_", "SPECBENCH_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(STANDIN), str(REPO)]),
               SPECBENCH_SGLANG_PYTHON=sys.executable, SPECBENCH_CONFIG_DIR=str(config),
               SPECBENCH_DATA_DIR=str(root / "data"), STANDIN_TAG=root.name)
    return env


def _once(root: Path, signum: signal.Signals) -> float:
    env = _env(root)
    run = subprocess.Popen([sys.executable, "-m", "bot.cli.main", "run", "standin-life"],
                           cwd=REPO, env=env, text=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        groups = wait_for_the_hanging_server(env, run)
        began = time.monotonic()
        run.send_signal(signum)
        if signum == signal.SIGKILL:
            run.wait(timeout=30)
            subprocess.run([sys.executable, "-m", "bot.cli.main", "status"], cwd=REPO, env=env,
                           capture_output=True, timeout=120, check=True)
        while set(groups) & set(groups_of(env["STANDIN_TAG"])):
            time.sleep(0.01)
        return time.monotonic() - began
    finally:
        if run.poll() is None:
            run.kill()
        run.wait(timeout=30)
        for pgid in groups_of(env["STANDIN_TAG"]):
            os.killpg(pgid, signal.SIGKILL)


def run() -> dict[str, str]:
    figures: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="bench-lifecycle-") as folder:
        for label, signum in (("SIGTERM", signal.SIGTERM),
                              ("kill -9, then status", signal.SIGKILL)):
            took = [_once(Path(folder) / f"{signum.name}-{i}", signum) for i in range(RUNS)]
            figures[f"seconds from {label} to no server left (median of {RUNS})"] = (
                f"{statistics.median(took):.2f} s (runs: {', '.join(f'{t:.2f}' for t in took)})")
    return figures
