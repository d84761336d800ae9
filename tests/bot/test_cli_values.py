"""Values the CLI refuses before anything is stored or run (issue 14, item 3, in part)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.store import Store


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECBENCH_")}
    env["SPECBENCH_DATA_DIR"] = str(tmp_path / "data")
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def stored(tmp_path: Path) -> list[str]:
    database = tmp_path / "data" / "specbench.db"
    if not database.exists():
        return []
    return [row.id for row in Store(f"sqlite:///{database}").list_batches()]


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "soon"])
def test_a_timeout_of_no_time_is_bad_input(tmp_path: Path, timeout: str) -> None:
    done = cli(tmp_path, "run", "cpu-demo", "--timeout", timeout)
    assert done.returncode == 2 and "--timeout" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert stored(tmp_path) == []


def test_analyze_refuses_a_metric_no_record_measures_and_a_negative_effect(
    tmp_path: Path, seed_path: Path
) -> None:
    done = cli(tmp_path, "analyze", str(seed_path), "--metric", "output_thruput")
    assert done.returncode == 2 and "measures 'output_thruput'" in done.stderr
    assert "did you mean 'output_throughput'" in done.stderr
    assert "FAILED" not in done.stdout
    done = cli(tmp_path, "analyze", str(seed_path), "--min-effect", "-5")
    assert done.returncode == 2 and "--min-effect" in done.stderr
    assert cli(tmp_path, "analyze", str(seed_path), "--min-effect", "0").returncode == 0


def test_sglang_missing_is_an_infrastructure_failure(tmp_path: Path) -> None:
    env_python = "/nonexistent/sglang-python"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECBENCH_")}
    env.update(SPECBENCH_DATA_DIR=str(tmp_path / "data"), SPECBENCH_SGLANG_PYTHON=env_python)
    done = subprocess.run([sys.executable, "-m", "bot.cli.main", "run", "eagle3"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "no such interpreter" in done.stderr and "Traceback" not in done.stderr
    assert stored(tmp_path) == []
