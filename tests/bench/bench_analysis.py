"""Issue 2's figures: analysis + rendering of a 500-approach batch; `specbench analyze` start-up."""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jobs.core.advice import analyze, load_remedies
from jobs.core.messages import render_report
from jobs.core.records import RunRecord
from jobs.core.rules import load_rules
from jobs.core.verdicts import Metric

FIXTURE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "seed-session.jsonl"
CAUSE_LINES = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    "Exception: Capture cuda graph failed: operation not permitted when stream is capturing",
    "AssertionError",
]


def _log(rng: random.Random) -> str:
    return "\n".join(["INFO: loading"] * 150 + [rng.choice(CAUSE_LINES)])


def synthetic_batch(n: int, *, seed: int = 7) -> list[RunRecord]:
    rng = random.Random(seed)
    fp = {"gpu": "NVIDIA H200", "gpu_count": 8, "compute_capability": "9.0", "driver": "580.82",
          "cuda": "12.8", "torch": "2.8.0", "sglang": "0.5.2", "nccl": "2.27.3"}
    base_args = {"model-path": "/m", "tp-size": 8, "mem-fraction-static": 0.85}
    records = [RunRecord(batch="b-bench", preset="bench", approach="baseline", role="baseline",
                         status="ok", server_args=base_args, fingerprint=fp,
                         metrics={"output_throughput": [99.0, 100.0, 101.0]})]
    for i in range(n):
        failed = rng.random() < 0.3
        level = rng.uniform(60, 140)
        records.append(RunRecord(
            batch="b-bench", preset="bench", approach=f"approach-{i:03d}", role="approach",
            status="failed" if failed else "ok", parent=f"approach-{i - 1:03d}" if i else None,
            change={"server_args": {"knob": i}, "env": {}},
            server_args={**base_args, "knob": i}, fingerprint=fp,
            log_tail=_log(rng) if failed else "",
            metrics={"output_throughput": [] if failed else
                     [level * rng.uniform(0.98, 1.02) for _ in range(3)],
                     "accept_length": 2.5 if i % 3 == 0 else None},
        ))
    return records


def run() -> dict[str, str]:
    records = synthetic_batch(500)
    rules, remedies = load_rules(), load_remedies()
    metric = Metric()
    times = []
    for _ in range(7):
        began = time.perf_counter()
        report = analyze(records, metric=metric, rules=rules, remedies=remedies)
        for fmt in ("text", "json", "slack"):
            render_report(report, fmt)
        times.append((time.perf_counter() - began) * 1000)
    startup = []
    env = {**os.environ, "SPECBENCH_DATA_DIR": tempfile.mkdtemp()}
    for _ in range(5):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-m", "bot.cli.main", "analyze", str(FIXTURE), "--format",
                        "json"], check=True, capture_output=True, env=env)
        startup.append(time.perf_counter() - began)
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, runpy; sys.argv=['specbench','analyze',"
         f"{str(FIXTURE)!r},'--format','json']\n"
         "import bot.cli.main\ntry:\n    bot.cli.main.main(sys.argv[1:])\nfinally:\n"
         "    print(__import__('json').dumps(sorted(sys.modules)), file=sys.stderr)"],
        capture_output=True, text=True, env=env,
    )
    modules = json.loads(probe.stderr.strip().splitlines()[-1])
    heavy = [m for m in ("torch", "celery", "slack_bolt", "slack_sdk", "transformers")
             if m in modules]
    return {
        "analysis + rendering, 500 approaches (median of 7)":
            f"{statistics.median(times):.0f} ms (target < 200 ms)",
        "`specbench analyze` start-up, seed fixture (median of 5)":
            f"{statistics.median(startup) * 1000:.0f} ms (target < 1 s)",
        "heavy imports in `specbench analyze`": ", ".join(heavy) or "none",
    }
