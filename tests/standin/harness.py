"""Test harness for the SGLang stand-in: env setup, plans, contexts, and a leak check.

Test modules call `make_standin(tmp_path, monkeypatch)` from a fixture of their own.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from jobs.core.plans import BatchPlan, RunConfig
from jobs.engines.base import RunContext
from jobs.engines.procs import group_members, is_port_free
from jobs.engines.sglang import probe as sglang_probe

STANDIN = Path(__file__).resolve().parent
TINY_BENCH = {
    "dataset-name": "random-ids", "random-input-len": 8, "random-output-len": 4,
    "random-range-ratio": 1.0, "num-prompts": 2, "max-concurrency": 1,
}
SERVER_ARGS = {
    "model-path": "/models/tiny-llama", "tp-size": 1, "mem-fraction-static": 0.8,
    "cuda-graph-max-bs": 8, "trust-remote-code": True,
}


@dataclass
class Standin:
    """One test's stand-in setup: a tag in every process's environment, an info file."""

    root: Path
    tag: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def info_file(self) -> Path:
        return self.root / "standin-info.jsonl"

    @property
    def help_log(self) -> Path:
        return self.root / "help.log"

    def config(
        self, approach: str, mode: str = "ok", *, role: str = "approach",
        server_args: dict[str, Any] | None = None, env: dict[str, str] | None = None,
    ) -> RunConfig:
        return RunConfig(
            approach=approach, role=role, parent=None, hypothesis=f"stand-in mode {mode}",
            change={"server_args": {}, "env": {}},
            server_args={**SERVER_ARGS, **(server_args or {})},
            env={"STANDIN_MODE": mode, "STANDIN_TAG": self.tag,
                 "STANDIN_INFO_FILE": str(self.info_file), **(env or {})},
        )

    def plan(self, *configs: RunConfig, reps: int = 1, startup_s: float = 20.0,
             bench_s: float = 20.0) -> BatchPlan:
        return BatchPlan(
            preset="standin", engine="sglang", queue="default", metric="output_throughput",
            lower_is_better=False, min_effect_pct=2.0, reps=reps, startup_s=startup_s,
            bench_s=bench_s, bench=dict(TINY_BENCH), configs=tuple(configs),
        )

    def ctx(self, plan: BatchPlan, approach: str, *, phases: list[tuple[str, dict[str, Any]]]
            | None = None, should_stop: Callable[[], bool] = lambda: False) -> RunContext:
        seen = phases if phases is not None else []
        return RunContext(
            batch_id="b-test", plan=plan, log_path=self.root / "logs" / f"{approach}.log",
            fingerprint={"gpu": "none", "gpu_count": 0},
            on_phase=lambda name, details: seen.append((name, details)),
            should_stop=should_stop,
        )

    def notes(self, role: str | None = None) -> list[dict[str, Any]]:
        if not self.info_file.exists():
            return []
        entries = [json.loads(line) for line in self.info_file.read_text().splitlines()]
        return [e for e in entries if role is None or e["role"] == role]

    def leftovers(self) -> list[str]:
        """Every live process that carries this test's tag, or sits in a noted group."""
        found: list[str] = []
        marker = f"STANDIN_TAG={self.tag}".encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes()
                stat = Path(f"/proc/{entry}/stat").read_text()
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if marker in environ.split(b"\0") and stat[stat.rfind(")") + 2] != "Z":
                found.append(f"{entry}: {cmdline.decode(errors='replace')}")
        for pgid in {e["pgid"] for e in self.notes()}:
            found += [f"{pid} in group {pgid}" for pid in group_members(pgid)]
        return found

    def assert_clean(self) -> None:
        assert self.leftovers() == []
        for entry in self.notes("server"):
            assert is_port_free(entry["port"]), f"port {entry['port']} still taken"


def make_standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Standin:
    """Point SPECBENCH_SGLANG_PYTHON at this interpreter with the stand-in first on its path."""
    path = os.pathsep.join(p for p in (str(STANDIN), os.environ.get("PYTHONPATH")) if p)
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.setenv("SPECBENCH_SGLANG_PYTHON", sys.executable)
    monkeypatch.setenv("SPECBENCH_DATA_DIR", str(tmp_path / "data"))
    for name in list(os.environ):
        if name.startswith("STANDIN_"):
            monkeypatch.delenv(name)
    setup = Standin(root=tmp_path)
    monkeypatch.setenv("STANDIN_HELP_LOG", str(setup.help_log))
    sglang_probe.clear_memory()
    return setup
