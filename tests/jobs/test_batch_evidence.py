"""Evidence in a real batch (issue 24, items 2, 5 and 6): a local batch with `evidence:
[collectives]` probes gloo for real before its servers and every record carries it; a model
folder without config.json leaves a reason, and the batch runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TINY = """\
name: tiny-evidence
engine: local
reps: 1
warmup: false
evidence: [collectives]
timeouts: {startup_s: 120, bench_s: 60}
bench: {num-prompts: 1, input-len: 16, output-len: 8}
baseline:
  server_args: {hidden-size: 32, num-layers: 2, num-heads: 2, vocab-size: 128, seed: 0, threads: 1}
approaches:
  - name: lookup
    server_args: {prompt-lookup-num-tokens: 4}
"""


def specbench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECBENCH_", "STANDIN_"))}
    env.update(SPECBENCH_DATA_DIR=str(tmp_path / "data"))
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], capture_output=True,
                          text=True, env=env, timeout=240, cwd=REPO)


def test_a_local_batch_gathers_real_gloo_evidence_into_every_record(tmp_path: Path) -> None:
    preset = tmp_path / "tiny-evidence.yaml"
    preset.write_text(TINY)
    done = specbench(tmp_path, "run", str(preset), "--format", "json")
    assert done.returncode == 0, done.stderr[-2000:]
    shown = specbench(tmp_path, "show", "--format", "jsonl")
    records = {r["approach"]: r for r in map(json.loads, shown.stdout.splitlines())}
    base: dict[str, Any] = records["baseline"]["evidence"]
    look: dict[str, Any] = records["lookup"]["evidence"]
    assert base["model"] == {"layers": 2, "hidden_size": 32, "dtype_bytes": 4}
    assert base["allreduces"] == 4 and base["allreduce"]["backend"] == "gloo"
    assert base["split"] is True  # the local engine runs one process: a split's cost
    assert base["allreduce"]["world"] == 2 and base["allreduce"]["bytes"] == 32 * 4
    assert look["allreduce"]["bytes"] == 5 * 32 * 4  # 4 drafted tokens and the verified one
    for found in (base, look):
        assert found["allreduce"]["latency_us"] > 0 and found["allreduce"]["busbw_gbps"] > 0
    assert "probe" in done.stderr  # the probe's phase shows while it runs

