"""Issue 24's probe figures: what one `specbench probe` costs (2 gloo ranks, the default sizes,
as a whole process), what the batch's evidence step pays per configuration group of the CPU
demo (its verify-step sizes), and that against the wall time of one `specbench run cpu-demo`.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jobs.batches.evidence_step import Evidence, ahead
from jobs.core.plans import load_preset, resolve
from jobs.evidence.collectives import measure

SPECBENCH = Path(sys.executable).with_name("specbench")
CALLS = 3


def _wall(argv: list[str], env: dict[str, str] | None = None) -> float:
    began = time.monotonic()
    subprocess.run(argv, check=True, capture_output=True, timeout=900,
                   env={**os.environ, **(env or {})})
    return time.monotonic() - began


def run() -> dict[str, str]:
    probe = [str(SPECBENCH), "probe", "--backend", "gloo", "--format", "json"]
    calls = [_wall(probe) for _ in range(CALLS)]
    figures = {f"probe, 2 gloo ranks, 4 KiB..4 MiB, whole CLI (median of {CALLS})":
               f"{statistics.median(calls):.2f} s (min {min(calls):.2f}, max {max(calls):.2f})"}

    plan = dataclasses.replace(resolve(load_preset("cpu-demo"), reps=1),
                               evidence=("collectives",))
    evidence = Evidence(plan, probe=measure)
    evidence.prepare(ahead(plan, plan.configs))  # as the worker does: the sweep's points too
    probed = sum(evidence.seconds)
    figures["evidence step, cpu-demo's configurations and sweep points"] = (
        f"{len(evidence.seconds)} probe(s), {probed:.2f} s "
        f"({', '.join(f'{s:.2f}' for s in evidence.seconds)} s each; the first includes "
        f"importing torch here to count the GPUs)")

    with tempfile.TemporaryDirectory() as folder:
        batch = _wall([str(SPECBENCH), "run", "cpu-demo", "--format", "json"],
                      env={"SPECBENCH_DATA_DIR": folder})
    figures["cpu-demo batch, whole CLI"] = f"{batch:.1f} s"
    figures["probes' share of a cpu-demo batch"] = f"{100 * probed / batch:.1f}%"
    return figures
