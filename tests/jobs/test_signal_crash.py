"""A server a signal killed names the signal in its why (issue 32, item 4): `--set threads=100000`
segfaulted both configurations and the why said only "crash". Through the real `specbench run` on
the stand-in SGLang (a server that dies by SIGSEGV while loading its weights, as a native kernel
or driver crash does), and through `specbench analyze` of a record whose exit code is -11.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.builders import standin_preset
from tests.conftest import make_record
from tests.standin.harness import Standin, make_standin

REPO = Path(__file__).resolve().parents[2]


def preset(*, tag: str, info: Path) -> str:
    return standin_preset(
        "segv", description="an approach whose server dies by SIGSEGV", min_effect_pct=None,
        bench_s=30, warmup=False, overridable=None,
        server_args={"mem-fraction-static": None, "cuda-graph-max-bs": None},
        env={"STANDIN_STARTUP_S": "0.1", "STANDIN_TAG": tag, "STANDIN_INFO_FILE": str(info)},
        approaches=[{"name": "native-kernel", "hypothesis": "a kernel that crashes the process",
                     "server_args": {"cuda-graph-max-bs": 16},
                     "env": {"STANDIN_MODE": "segfault"}}],
    )


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Standin]:
    setup = make_standin(tmp_path, monkeypatch)
    yield setup
    setup.assert_clean()


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (os.environ.get("PYTHONPATH"), str(REPO)) if p)}
    env.pop("SPECBENCH_BROKER_URL", None)
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=170)


@pytest.mark.timeout(180)
def test_a_server_killed_by_sigsegv_says_so_in_its_why(tmp_path: Path, standin: Standin) -> None:
    path = tmp_path / "segv.yaml"
    path.write_text(preset(tag=standin.tag, info=standin.info_file))
    done = cli(tmp_path, "run", str(path), "--format", "json")
    assert done.returncode == 0, done.stderr[-3000:]
    (result,) = json.loads(done.stdout)["results"]
    assert (result["verdict"], result["cause"]) == ("failed", "crash"), result
    assert "killed by SIGSEGV (signal 11)" in result["why"], result["why"]
    shown = cli(tmp_path, "show", "--format", "jsonl")
    records = {r["approach"]: r for r in map(json.loads, shown.stdout.splitlines())}
    assert records["native-kernel"]["exit_code"] == -11
    assert records["baseline"]["status"] == "ok"


def test_analyze_names_the_signal_of_a_recorded_exit_code(tmp_path: Path) -> None:
    base = make_record("baseline", samples=(80.0, 81.0, 80.5))
    dead = make_record("graphs", samples=(), status="failed",
                       log_tail="Load weight begin. avail mem=94.21 GB")
    runs = tmp_path / "runs.jsonl"
    lines = [base.to_dict(), {**dead.to_dict(), "exit_code": -11}]
    runs.write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = cli(tmp_path, "analyze", str(runs), "--format", "json")
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(done.stdout)["results"]
    assert result["cause"] == "crash"
    assert "killed by SIGSEGV (signal 11); its last log line: Load weight begin" in result["why"]
