"""Test harness for the vLLM stand-in: an interpreter that finds it, plans, the leak check.

`make_vllm_standin(tmp_path, monkeypatch)` writes an interpreter wrapper that runs this Python
with tests/standin first on PYTHONPATH (so `python -m vllm.entrypoints.cli.main` is the
stand-in, and nothing else of the test process's path changes) and points
SPECBENCH_VLLM_PYTHON at it, as a worker's host points it at a venv with vLLM installed.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jobs.core.plans import BatchPlan, RunConfig
from jobs.engines.procs import free_port as free_port  # the tests' ports: the product's pick
from tests.standin.harness import STANDIN, Standin

MODEL = "/models/tiny-llama"
TINY_BENCH = {
    "dataset-name": "random", "random-input-len": 8, "random-output-len": 4,
    "num-prompts": 2, "max-concurrency": 1,
}
SERVER_ARGS = {
    "model": MODEL, "tensor-parallel-size": 1, "gpu-memory-utilization": 0.8,
    "max-num-seqs": 8,
}
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy for 127.0.0.1
SPECULATIVE = {"method": "eagle3", "model": "/models/tiny-eagle3", "num_speculative_tokens": 3}


@dataclass
class VllmStandin(Standin):
    """One test's vLLM stand-in: the wrapper interpreter, a tag, an info file."""

    python: Path = Path(sys.executable)

    def config(
        self, approach: str, mode: str = "ok", *, role: str = "approach",
        server_args: dict[str, Any] | None = None, env: dict[str, str] | None = None,
    ) -> RunConfig:
        base = super().config(approach, mode, role=role, server_args={}, env=env)
        merged = {**SERVER_ARGS, **(server_args or {})}
        return RunConfig(approach=base.approach, role=base.role, parent=base.parent,
                         hypothesis=base.hypothesis, change=base.change, server_args=merged,
                         env=base.env)

    def plan(self, *configs: RunConfig, reps: int = 1, startup_s: float = 20.0,
             bench_s: float = 20.0) -> BatchPlan:
        return BatchPlan(
            preset="standin-vllm", engine="vllm", queue="default", metric="output_throughput",
            lower_is_better=False, min_effect_pct=2.0, reps=reps, startup_s=startup_s,
            bench_s=bench_s, bench=dict(TINY_BENCH), configs=tuple(configs),
        )

    def env(self, **extra: str) -> dict[str, str]:
        """This process's environment for a stand-in child: the tag, the info file, `extra`."""
        return {**os.environ, "STANDIN_TAG": self.tag, "STANDIN_INFO_FILE": str(self.info_file),
                **extra}

    def cli(self, *args: str, env: dict[str, str] | None = None,
            timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """`$SPECBENCH_VLLM_PYTHON -m vllm.entrypoints.cli.main ARGS`, run to its end in a
        process group of its own (as the worker runs it: the leak check looks at that group)."""
        return subprocess.run([str(self.python), "-m", "vllm.entrypoints.cli.main", *args],
                              capture_output=True, text=True, timeout=timeout,
                              env=env or self.env(), start_new_session=True)

    def serve(self, *args: str, port: int, env: dict[str, str] | None = None,
              log: Path | None = None) -> subprocess.Popen[bytes]:
        """`... serve ARGS --host 127.0.0.1 --port PORT` in its own process group."""
        out = (log or self.root / f"serve-{port}.log").open("wb")
        return subprocess.Popen(
            [str(self.python), "-m", "vllm.entrypoints.cli.main", "serve", *args, "--host",
             "127.0.0.1", "--port", str(port)], stdout=out, stderr=subprocess.STDOUT,
            env=env or self.env(), start_new_session=True)


def wait_health(port: int, timeout: float = 60.0) -> bool:
    """Whether GET /health answered 200 within `timeout`, as the engine's readiness check."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with OPENER.open(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                if r.status == 200:
                    return True
        except OSError:
            time.sleep(0.05)
    return False


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the server's whole group (it may ignore SIGTERM), and reap it."""
    try:
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


def make_vllm_standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> VllmStandin:
    """Point SPECBENCH_VLLM_PYTHON at a wrapper of this interpreter that finds the stand-in."""
    wrapper = tmp_path / "vllm-python"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH={shlex.quote(str(STANDIN))}${{PYTHONPATH:+:$PYTHONPATH}} '
        f'exec {shlex.quote(sys.executable)} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("SPECBENCH_VLLM_PYTHON", str(wrapper))
    monkeypatch.setenv("SPECBENCH_DATA_DIR", str(tmp_path / "data"))
    for name in list(os.environ):
        if name.startswith("STANDIN_"):
            monkeypatch.delenv(name)
    return VllmStandin(root=tmp_path, python=wrapper)
