"""Load levels (issue 23): the wall time each extra level adds to a configuration's run, against
the bench time of a level alone (target: ratio ~1, no server restart), on the SGLang and vLLM
stand-ins. One configuration runs with one level, then with three; per extra level = (3 levels'
wall - 1 level's) / 2, and a level's bench time is measured from its phases (from its "level"
phase to the next level's, or to "stopping")."""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jobs.core.plans import BatchPlan, RunConfig
from jobs.engines import get_engine
from jobs.engines.sglang import probe as sglang_probe
from tests.standin.harness import STANDIN, Standin

BENCH = {"dataset-name": "random-ids", "random-input-len": 8, "random-output-len": 4,
         "random-range-ratio": 1.0, "num-prompts": 8}
VLLM_BENCH = {"dataset-name": "random", "random-input-len": 8, "random-output-len": 4,
              "num-prompts": 8}


def _environment(root: Path) -> None:
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(STANDIN), os.environ.get("PYTHONPATH")) if p)
    os.environ["SPECBENCH_SGLANG_PYTHON"] = sys.executable
    os.environ["SPECBENCH_VLLM_PYTHON"] = sys.executable
    os.environ["SPECBENCH_DATA_DIR"] = str(root / "data")
    sglang_probe.clear_memory()


def _plan(standin: Standin, engine: str, levels: list[int]) -> tuple[BatchPlan, RunConfig]:
    config = standin.config("baseline", role="baseline")
    bench = BENCH
    if engine == "vllm":
        config = dataclasses.replace(config, server_args={"model": "/models/tiny",
                                                          "tensor-parallel-size": 1})
        bench = VLLM_BENCH
    plan = dataclasses.replace(standin.plan(config, reps=2), engine=engine, bench=dict(bench),
                               warmup=True, loads={"max-concurrency": levels})
    return plan, config


def _timed(root: Path, engine: str, levels: list[int]) -> tuple[float, list[float], float]:
    """(wall s, each level's bench s, the server's start s) of one configuration's run."""
    standin = Standin(root=root / f"{engine}-{len(levels)}")
    plan, config = _plan(standin, engine, levels)
    marks: list[tuple[str, float]] = []
    ctx = dataclasses.replace(standin.ctx(plan, "baseline"),
                              on_phase=lambda name, _d: marks.append((name, time.monotonic())))
    began = time.monotonic()
    record = get_engine(engine).run(config, ctx)
    wall = time.monotonic() - began
    if record.status != "ok":
        raise RuntimeError(f"{engine} with {len(levels)} levels: {record.status}\n"
                           f"{record.log_tail}")
    starts = [t for name, t in marks if name in ("level", "stopping")]
    at: dict[str, Any] = dict(marks)
    return wall, [b - a for a, b in zip(starts, starts[1:], strict=False)], \
        at["ready"] - at["launching"]


def run() -> dict[str, str]:
    figures: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _environment(root)
        for engine in ("sglang", "vllm"):
            one, _, start = _timed(root, engine, [1])
            three, each, _ = _timed(root, engine, [1, 2, 4])
            extra = (three - one) / 2
            bench = sum(each[1:]) / len(each[1:])  # the levels the 3-level run added
            figures[f"{engine}: added wall time per extra level"] = (
                f"{extra:.2f} s vs its bench time {bench:.2f} s: ratio {extra / bench:.2f} "
                f"(target ~1: the bench time alone; a server restart would add at least "
                f"{start:.2f} s)")
            figures[f"{engine}: 1 level / 3 levels wall"] = f"{one:.2f} s / {three:.2f} s"
    return figures
