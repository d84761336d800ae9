"""The newcomer's demo (issue 21 item 4): `specbench run cpu-demo` twice in a row, each in a
data dir of its own, timed as a whole process, and the verdicts of the two compared approach by
approach. Sweep points are left out of the comparison (Optuna chooses them from what it measures,
so two runs may try different points); the sweep's confirmed outcome is compared instead.
A fresh clone's install is timed by hand (README): this bench reuses .venv.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SPECBENCH = Path(sys.executable).with_name("specbench")


def verdicts(report: dict[str, Any]) -> dict[str, str]:
    """approach -> verdict for the preset's named approaches, plus the sweep's confirmed outcome."""
    named = {r["approach"]: r["verdict"] for r in report["results"] if "@" not in r["approach"]}
    confirmation = (report.get("sweep") or {}).get("confirmation") or {}
    named["sweep winner's confirmation"] = str(confirmation.get("verdict", "-"))
    return named


def one_demo() -> tuple[float, dict[str, str]]:
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as data:
        env = {**os.environ, "SPECBENCH_DATA_DIR": data}
        began = time.monotonic()
        done = subprocess.run([str(SPECBENCH), "run", "cpu-demo", "--format", "json"], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=900, check=False)
        took = time.monotonic() - began
    if done.returncode != 0:
        raise RuntimeError(f"cpu-demo exited {done.returncode}: {done.stderr[-2000:]}")
    return took, verdicts(json.loads(done.stdout))


def run() -> dict[str, str]:
    first_s, first = one_demo()
    second_s, second = one_demo()
    differ = sorted(k for k in first.keys() | second.keys() if first.get(k) != second.get(k))
    return {
        "demo batch, first run": f"{first_s:.0f} s",
        "demo batch, second run": f"{second_s:.0f} s",
        "verdicts": ", ".join(f"{k} {v}" for k, v in first.items()),
        "same verdict in both runs": (f"{len(first) - len(differ)} of {len(first)}"
                                      + (f" (differ: {', '.join(differ)})" if differ else "")),
    }
