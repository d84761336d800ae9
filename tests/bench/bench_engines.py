"""The engine figures (issues 3 and 22), on the SGLang and vLLM stand-ins: the harness's overhead
on a batch, and the time from a fatal log line to the server's process group being gone."""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from jobs.batches.execution import execute_batch
from jobs.batches.planning import submit
from jobs.core.events import NullSink
from jobs.core.plans import BatchPlan, RunConfig
from jobs.engines import get_engine, procs
from jobs.engines.sglang import probe as sglang_probe
from jobs.store import Store
from tests.standin.harness import STANDIN, Standin


def _environment(root: Path) -> None:
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(STANDIN), os.environ.get("PYTHONPATH")) if p
    )
    os.environ["SPECBENCH_SGLANG_PYTHON"] = sys.executable
    os.environ["SPECBENCH_VLLM_PYTHON"] = sys.executable
    os.environ["SPECBENCH_DATA_DIR"] = str(root / "data")
    sglang_probe.clear_memory()


def _server_lifetimes() -> list[tuple[float, float]]:
    """Patch ProcessGroup to note when each launch_server group starts and is gone."""
    spans: list[tuple[float, float]] = []
    original_init, original_stop = procs.ProcessGroup.__init__, procs.ProcessGroup.stop

    def init(self: procs.ProcessGroup, *args: Any, **kwargs: Any) -> None:
        self._bench_began = time.monotonic()  # type: ignore[attr-defined]
        original_init(self, *args, **kwargs)

    def stop(self: procs.ProcessGroup, **kwargs: Any) -> float:
        took = original_stop(self, **kwargs)
        if "sglang.launch_server" in self.argv or self.argv[3:5] == ["serve", "/models/tiny"]:
            spans.append((self._bench_began, time.monotonic()))  # type: ignore[attr-defined]
        return took

    procs.ProcessGroup.__init__ = init  # type: ignore[method-assign]
    procs.ProcessGroup.stop = stop  # type: ignore[method-assign]
    return spans


def _outside(spans: list[tuple[float, float]], *, began: float, ended: float) -> str:
    """Where the batch's time outside its servers went: before the first, between, after."""
    ordered = sorted(spans)
    between = sum(max(0.0, b[0] - a[1]) for a, b in zip(ordered, ordered[1:], strict=False))
    return (f"before the first server {ordered[0][0] - began:.2f} s (preflight, probes), "
            f"between servers {between:.2f} s ({len(ordered) - 1} gaps: records, events, next "
            f"launch), after the last {ended - ordered[-1][1]:.2f} s (report)")


def _for(engine: str, plan: BatchPlan) -> BatchPlan:
    """The stand-in plan on `engine`: vLLM's model as its positional argument, its bench."""
    if engine == "sglang":
        return plan

    def as_vllm(config: RunConfig) -> RunConfig:
        return replace(config, server_args={"model": "/models/tiny", "tensor-parallel-size": 1})

    return replace(plan, engine=engine, configs=tuple(as_vllm(c) for c in plan.configs),
                   bench={"dataset-name": "random", "random-input-len": 8,
                          "random-output-len": 4, "num-prompts": 2, "max-concurrency": 1})


def _overhead(root: Path, engine: str) -> tuple[float, float, float, str]:
    standin = Standin(root=root)
    configs = [standin.config("baseline", role="baseline")]
    configs += [standin.config(f"ok-{i}", env={"STANDIN_THROUGHPUT": str(80 + i)})
                for i in range(5)]
    configs += [standin.config("crash", "crash"), standin.config("children", "children")]
    plan = _for(engine, standin.plan(*configs, reps=2))
    store = Store(f"sqlite:///{root}/bench-{engine}.db")
    row, _ = submit(plan, store=store, requested_by="bench")
    spans = _server_lifetimes()
    began = time.monotonic()
    execute_batch(row.id, store=store, sink=NullSink(), engine=get_engine(engine))
    ended = time.monotonic()
    wall = ended - began
    served = sum(end - start for start, end in spans)
    store.close()
    return wall, served, wall / served, _outside(spans, began=began, ended=ended)


def _fatal_to_gone(root: Path, engine: str, runs: int = 3) -> list[float]:
    out = []
    for i in range(runs):
        standin = Standin(root=root / f"fatal-{engine}-{i}")
        standin.root.mkdir(parents=True)
        config = standin.config("fatal", "fatal-then-hang")
        plan = _for(engine, standin.plan(config, startup_s=60))
        get_engine(engine).run(plan.configs[0], standin.ctx(plan, "fatal"))
        mark = [json.loads(x) for x in standin.info_file.read_text().splitlines()
                if json.loads(x)["role"] == "fatal"][0]
        out.append(time.time() - mark["time"])
    return out


def run() -> dict[str, str]:
    figures: dict[str, str] = {}
    for engine in ("sglang", "vllm"):
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            _environment(root)
            wall, served, ratio, outside = _overhead(root, engine)
            gone = _fatal_to_gone(root, engine)
        figures.update({
            f"{engine}: harness overhead, stand-in batch of 8 (wall / Σ server start→group gone)":
                f"{ratio:.3f} ({wall:.1f} s / {served:.1f} s; target ≤ 1.10)",
            f"{engine}: harness overhead: the batch's time outside its servers": outside,
            f"{engine}: fatal log line → server group gone (median of 3, server ignores SIGTERM)":
                f"{statistics.median(gone):.2f} s (max {max(gone):.2f} s; target < 2 s)",
        })
    return figures
