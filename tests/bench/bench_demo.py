"""The newcomer's demo (issue 21 item 4): `specbench run cpu-demo` twice in a row, each in a
data dir of its own, timed as a whole process, and the verdicts of the two compared approach by
approach. Sweep points are left out of the comparison (Optuna chooses them from what it measures,
so two runs may try different points); the sweep's confirmed outcome is compared instead.
A fresh clone's install is timed by hand (README): this bench reuses .venv.

Each configuration's start (its `launching` to `ready` on the progress lines) is reported too:
the first waits for the local engine's fork server to import torch, the others are forked from it
(`SPECBENCH_LOCAL_FORKSERVER=0` in the environment measures fresh processes instead).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SPECBENCH = Path(sys.executable).with_name("specbench")
_PHASE = re.compile(r"^\[\s*([\d.]+)s\] (?:confirmation )?(\d+/\d+ \S+): (launching|ready)$")


def verdicts(report: dict[str, Any]) -> dict[str, str]:
    """approach -> verdict for the preset's named approaches, plus the sweep's confirmed outcome."""
    named = {r["approach"]: r["verdict"] for r in report["results"] if "@" not in r["approach"]}
    confirmation = (report.get("sweep") or {}).get("confirmation") or {}
    named["sweep winner's confirmation"] = str(confirmation.get("verdict", "-"))
    return named


def start_seconds(progress: str) -> list[float]:
    """Seconds from `launching` to `ready` of each configuration, in order, from the progress
    lines the CLI writes to stderr."""
    launched: dict[str, float] = {}
    starts: list[float] = []
    for line in progress.splitlines():
        if (found := _PHASE.match(line.strip())) is None:
            continue
        at, who, phase = float(found[1]), found[2], found[3]
        if phase == "launching":
            launched[who] = at
        elif who in launched:
            starts.append(at - launched.pop(who))
    return starts


def one_demo() -> tuple[float, dict[str, str], list[float]]:
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as data:
        env = {**os.environ, "SPECBENCH_DATA_DIR": data}
        began = time.monotonic()
        done = subprocess.run([str(SPECBENCH), "run", "cpu-demo", "--format", "json"], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=900, check=False)
        took = time.monotonic() - began
    if done.returncode != 0:
        raise RuntimeError(f"cpu-demo exited {done.returncode}: {done.stderr[-2000:]}")
    return took, verdicts(json.loads(done.stdout)), start_seconds(done.stderr)


def run() -> dict[str, str]:
    first_s, first, starts = one_demo()
    second_s, second, _ = one_demo()
    differ = sorted(k for k in first.keys() | second.keys() if first.get(k) != second.get(k))
    return {
        "demo batch, first run": f"{first_s:.0f} s",
        "demo batch, second run": f"{second_s:.0f} s",
        "configuration start, first run": (
            f"first {starts[0]:.1f} s, then median {statistics.median(starts[1:]):.2f} s "
            f"over {len(starts) - 1}" if len(starts) > 1 else "-"),
        "verdicts": ", ".join(f"{k} {v}" for k, v in first.items()),
        "same verdict in both runs": (f"{len(first) - len(differ)} of {len(first)}"
                                      + (f" (differ: {', '.join(differ)})" if differ else "")),
    }
