"""`specbench console`: the same router and thread, drawn in a terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.standin.harness import SERVER_ARGS, STANDIN, TINY_BENCH

REPO = Path(__file__).resolve().parents[2]
PRESET = {
    "name": "standin-demo", "description": "Two approaches on the SGLang stand-in",
    "engine": "sglang", "metric": "output_throughput", "min_effect_pct": 2.0, "reps": 2,
    "timeouts": {"startup_s": 20, "bench_s": 20}, "bench": TINY_BENCH,
    "overridable": ["mem-fraction-static"],
    "baseline": {"server_args": SERVER_ARGS,
                 "env": {"STANDIN_THROUGHPUT": "82.0", "STANDIN_STARTUP_S": "0.1"}},
    "approaches": [
        {"name": "faster", "hypothesis": "More tokens per second",
         "env": {"STANDIN_THROUGHPUT": "95.0"}},
        {"name": "crashes", "hypothesis": "A server that dies", "env": {"STANDIN_MODE": "crash"}},
    ],
}


def console(tmp_path: Path, line: str, *, preset: bool = True) -> subprocess.CompletedProcess[str]:
    import yaml

    config = tmp_path / "config"
    if not config.exists():
        import shutil

        shutil.copytree(REPO / "config", config)
        (config / "presets" / "standin-demo.yaml").write_text(yaml.safe_dump(PRESET))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STANDIN_", "SPECBENCH_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(STANDIN), str(REPO)]),
               SPECBENCH_SGLANG_PYTHON=sys.executable, SPECBENCH_CONFIG_DIR=str(config),
               SPECBENCH_DATA_DIR=str(tmp_path / "data"), USER="tester")
    return subprocess.run([sys.executable, "-m", "bot.cli.main", "console", "-c", line, "--timeout",
                           "60"], capture_output=True, text=True, env=env, timeout=90, cwd=REPO)


def test_console_runs_a_batch_and_prints_the_thread_and_the_report(tmp_path: Path) -> None:
    done = console(tmp_path, "/specbench run standin-demo")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    lines = out.splitlines()
    assert lines[0].startswith("specbench standin-demo · batch b-")
    assert "for tester" in lines[0]
    thread = [line for line in lines if line.startswith("  │ ")]
    assert any("Progress of" in line for line in thread)
    assert any("faster: improved" in line for line in thread)  # plain progress lines (no tty)
    assert any("Key achievement: faster" in line for line in thread)
    assert any("[file]" in line and "-chart.png" in line for line in thread)
    assert any("[file]" in line and "-runs.jsonl" in line for line in thread)
    assert any(line.startswith("(edited) standin-demo · batch") for line in lines)
    assert "\x1b[" not in out


@pytest.mark.parametrize(("line", "code", "expected"), [
    ("stauts", 2, "Did you mean `status`?"),
    ("/specbench run nope", 2, "unknown preset 'nope'"),
    ("help", 0, "Usage: /specbench COMMAND"),
    ("status", 0, "No batch is running or queued."),
])
def test_console_one_liners(tmp_path: Path, line: str, code: int, expected: str) -> None:
    done = console(tmp_path, line)
    assert done.returncode == code, done.stderr
    assert expected in done.stdout
