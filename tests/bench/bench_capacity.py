"""Capacity under the SLO (issue 36): what the search costs against a scan of every integer load
up to the capacity, on the SGLang stand-in and on the local engine's shipped `cpu-capacity`.

Per configuration: the levels the search measured and their bench seconds (each level from its
"level" phase to the next, or to "stopping": the server's start is left out), against the
levels and bench seconds of a scan that measures every load from 1 to the capacity plus one
(the first that breaks), run as load levels on the same engine (at most 16 levels a server, so
a longer scan takes several). The local engine's configurations also give their wall time, the
figure the issue asks to stay under 60 s on 2 cores."""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jobs.core.capacity import capacity_of
from jobs.core.plans import BatchPlan, RunConfig, load_preset, resolve
from jobs.engines import get_engine
from jobs.engines.base import Engine, RunContext
from jobs.engines.sglang import probe as sglang_probe
from tests.standin.harness import STANDIN, Standin

BENCH = {"dataset-name": "random-ids", "random-input-len": 8, "random-output-len": 4,
         "random-range-ratio": 1.0}
CHUNK = 16  # the most load levels one server is asked for


def _environment(root: Path) -> None:
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(STANDIN), os.environ.get("PYTHONPATH")) if p)
    os.environ["SPECBENCH_SGLANG_PYTHON"] = sys.executable
    os.environ["SPECBENCH_DATA_DIR"] = str(root / "data")
    sglang_probe.clear_memory()


def _timed(engine: Engine, plan: BatchPlan, config: RunConfig, log: Path
           ) -> tuple[Any, list[float], float]:
    """(record, each level's bench s, wall s) of one configuration's run."""
    marks: list[tuple[str, float]] = []
    ctx = RunContext(batch_id="b-bench", plan=plan, log_path=log, fingerprint={},
                     on_phase=lambda name, _d: marks.append((name, time.monotonic())),
                     should_stop=lambda: False)
    began = time.monotonic()
    record = engine.run(config, ctx)
    wall = time.monotonic() - began
    if record.status != "ok":
        raise RuntimeError(f"{config.approach}: {record.status}\n{record.log_tail[-2000:]}")
    edges = [t for name, t in marks if name in ("level", "stopping")]
    return record, [b - a for a, b in zip(edges, edges[1:], strict=False)], wall


def _scan(engine: Engine, plan: BatchPlan, config: RunConfig, top: int, log: Path
          ) -> tuple[int, float]:
    """(levels, bench s) of measuring every load from 1 to `top`, CHUNK levels a server."""
    seconds, loads = 0.0, list(range(1, top + 1))
    for start in range(0, len(loads), CHUNK):
        part = loads[start:start + CHUNK]
        scan = dataclasses.replace(plan, capacity=None, loads={"max-concurrency": part})
        _, each, _ = _timed(engine, scan, config, log.with_name(f"{log.stem}-{start}.log"))
        seconds += sum(each)
    return len(loads), seconds


def _compare(figures: dict[str, str], name: str, engine: Engine, plan: BatchPlan,
             config: RunConfig, root: Path, *, wall: bool = False) -> None:
    record, each, took = _timed(engine, plan, config, root / f"{name}.log")
    found = capacity_of(record)
    assert found is not None and found.value is not None
    top = int(found.above if found.above is not None else found.value)
    levels, seconds = _scan(engine, plan, config, top, root / f"{name}-scan.log")
    searched = sum(each)
    figures[f"{name}: capacity"] = (f"{found.value:g} ({found.binding or 'nothing'} binds), "
                                    f"search complete: {found.complete}")
    figures[f"{name}: search"] = f"{len(found.levels)} levels, {searched:.1f} bench s"
    figures[f"{name}: scan 1..{top}"] = (f"{levels} levels, {seconds:.1f} bench s: the search "
                                         f"takes {searched / seconds:.0%} of it")
    if wall:
        figures[f"{name}: wall time"] = f"{took:.1f} s (target: under 60 s on 2 cores)"


def run() -> dict[str, str]:
    figures: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _environment(root)
        standin = Standin(root=root / "standin")
        standin.root.mkdir(parents=True)
        sglang = get_engine("sglang")
        for growth, top in (("0.1", 64), ("0.02", 128)):
            config = standin.config("baseline", role="baseline", env={
                "STANDIN_TTFT_GROWTH": growth, "STANDIN_STARTUP_S": "0.2"})
            plan = dataclasses.replace(
                standin.plan(config, reps=2), bench={**BENCH, "num-prompts": top},
                warmup=False, slo={"median_ttft_ms": 300.0},
                capacity={"knob": "max-concurrency", "from": 1, "max": top})
            _compare(figures, f"sglang stand-in, TTFT growth {growth}", sglang, plan, config,
                     root)
        local = get_engine("local")
        try:
            plan = resolve(load_preset("cpu-capacity"))
            for config in plan.configs:
                _compare(figures, f"cpu-capacity {config.approach}", local, plan, config,
                         root, wall=True)
        finally:
            close = getattr(local, "close", None)
            if callable(close):
                close()
    return figures


if __name__ == "__main__":
    for key, value in run().items():
        print(f"{key}: {value}")
