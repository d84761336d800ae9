"""Bench of bounded sweeps (issue 19 item 2): planning time and peak memory for grids of 10^3,
10^4 and 10^6 points.

Each figure comes from a fresh process, so that its peak RSS is its own. Within the limit
(SPECBENCH_MAX_POINTS, 10,000) "planning" is what happens before a batch's first server starts:
the preset read and checked, the plan resolved and its values checked (`plan_batch`,
`check_values`), the stored plan's JSON, and the search's first proposal; for `adaptive` also a
proposal with 5 points measured, and for `grid` the walk over every point's configuration that a
grid search makes. The 10^6-point grid is refused: its figures are the whole `specbench run`
process's, from start to exit 2, interpreter start-up included.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHAPES = {1_000: 3, 10_000: 4, 1_000_000: 6}  # points -> knobs of 10 values each

PLAN = """\
import json, resource, sys, time
t0 = time.perf_counter()
from jobs.batches.planning import plan_batch
from jobs.batches.values import check_values
from jobs.search import next_point
imported = time.perf_counter()
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
plan = plan_batch(sys.argv[1])
check_values(plan)
stored = len(json.dumps(plan.to_dict()))
planned = time.perf_counter()
sweep = plan.sweep
first = next_point(sweep, {}, lower_is_better=False, batch="b-bench")
proposed = time.perf_counter()
figures = {"plan_s": planned - imported, "first_s": proposed - planned, "stored": stored}
if sweep.search == "adaptive":
    measured = {}
    for i in range(5):
        name = next_point(sweep, measured, lower_is_better=False, batch="b-bench")
        measured[name] = 80.0 + i
    began = time.perf_counter()
    next_point(sweep, measured, lower_is_better=False, batch="b-bench")
    figures["sixth_s"] = time.perf_counter() - began
else:
    began = time.perf_counter()
    walked = sum(1 for _ in plan.points)
    figures["walk_s"] = time.perf_counter() - began
    figures["walked"] = walked
figures["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
figures["imports_mb"] = rss0 / 1024
print(json.dumps(figures))
"""

MEASURE = """\
import json, resource, subprocess, sys, time
begun = time.monotonic()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": done.returncode, "stderr": done.stderr.strip(),
                  "wall_s": time.monotonic() - begun, "cpu_s": usage.ru_utime + usage.ru_stime,
                  "peak_mb": usage.ru_maxrss / 1024}))
"""


def _preset(name: str, points: int, search: str) -> str:
    knobs = "\n".join(f"    SWEEP_K{i}: {list(range(10))}" for i in range(SHAPES[points]))
    budget = "  budget: 12\n" if search == "adaptive" else ""
    return f"""\
name: {name}
description: a {points:,}-point {search} sweep for the bench
engine: local
reps: 1
baseline:
  server_args: {{threads: 1}}
sweep:
  name: s
  grid:
{knobs}
  search: {search}
{budget}"""


def _child(code: str, *args: str, cwd: Path) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECBENCH_")}
    env.update({"PYTHONPATH": str(REPO), "SPECBENCH_DATA_DIR": str(cwd / "data")})
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600, check=True)
    figures: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def run() -> dict[str, str]:
    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for points in (1_000, 10_000):
            for search in ("adaptive", "grid"):
                name = f"bench-{search}-{points}"
                path = root / f"{name}.yaml"
                path.write_text(_preset(name, points, search))
                f = _child(PLAN, str(path), cwd=root)
                extra = (f"6th proposal {float(f['sixth_s']):.2f} s" if search == "adaptive"
                         else f"walk of {f['walked']:,} configurations {float(f['walk_s']):.2f} s")
                out[f"{points:,} points, {search}: planning"] = (
                    f"{float(f['plan_s']):.3f} s plan, {float(f['first_s']):.2f} s first "
                    f"proposal, {extra}; stored plan {int(str(f['stored'])):,} bytes")
                out[f"{points:,} points, {search}: peak RSS"] = (
                    f"{float(f['peak_mb']):.0f} MB ({float(f['imports_mb']):.0f} MB before the "
                    "search imported Optuna, whose GP sampler brings torch)")
        for search in ("adaptive", "grid"):
            name = f"bench-huge-{search}"
            path = root / f"{name}.yaml"
            path.write_text(_preset(name, 1_000_000, search))
            f = _child(MEASURE, sys.executable, "-m", "bot.cli.main", "run", str(path),
                       cwd=root)
            assert f["rc"] == 2, f
            out[f"1,000,000 points, {search}: refused"] = (
                f"exit 2 in {float(f['wall_s']):.2f} s wall, {float(f['cpu_s']):.2f} s CPU, "
                f"peak RSS {float(f['peak_mb']):.0f} MB (whole CLI process)")
        out["1,000,000 points: the refusal"] = str(f["stderr"])
    return out
