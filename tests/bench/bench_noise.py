"""Noise, measured (issue 31): what bracketing costs. `specbench run cpu-demo` on the local
engine measures its baseline first and again last (a second server start); the closing run's
seconds (from its `preflight` to its end on the progress lines) against the batch's wall time,
in one run. The closing run's drift is reported beside it: on a busy machine it is the noise
that run saw.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from jobs.core.noise import CLOSING

REPO = Path(__file__).resolve().parents[2]
SPECBENCH = Path(sys.executable).with_name("specbench")
_LINE = re.compile(r"^\[\s*([\d.]+)s\] (.*)$")


def run() -> dict[str, str]:
    with tempfile.TemporaryDirectory() as root:
        env = {**os.environ, "SPECBENCH_DATA_DIR": root}
        env.pop("SPECBENCH_BROKER_URL", None)
        done = subprocess.run([str(SPECBENCH), "run", "cpu-demo", "--format", "json"], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    times = [(float(m[1]), m[2]) for line in done.stderr.splitlines()
             if (m := _LINE.match(line.strip()))]
    closing = [at for at, text in times if f" {CLOSING}: " in text]
    batch_end = next(at for at, text in times if text.startswith("batch ") and
                     text.endswith(" done"))
    # the sweep batch's own part: until its confirmation batch starts
    sweep_end = min((at for at, text in times if text.startswith("confirmation")),
                    default=batch_end)
    report = json.loads(done.stdout)
    spent = max(closing) - min(closing)
    return {
        "closing bracket (s)": f"{spent:.1f}",
        "batch wall, confirmation included (s)": f"{batch_end:.1f}",
        "bracket's share of the batch": f"{spent / batch_end * 100:.1f}%",
        "bracket's share before the confirmation": f"{spent / sweep_end * 100:.1f}%",
        "baseline first -> last (tok/s)": " -> ".join(
            f"{v:.0f}" for v in report["baseline"]["bracket"]),
        "drift": f"{report['baseline']['drift_pct']:+.1f}%"
                 + (" (beyond noise)" if report["baseline"].get("drift") else ""),
    }
