#!/usr/bin/env bash
# What specbench reads of a GPU host, checked against the real hardware: the raw nvidia-smi
# answers, the fingerprint built from them, the GPU count the probe uses, and an NCCL all-reduce
# timed by the probe's own rank workers on this host's GPUs (one GPU: a world of 1, which times
# the kernel and CUDA's synchronisation with no link to cross). Needs python3 with a CUDA build
# of torch and PyYAML, nothing else of specbench's. Writes DIR/ (default gpu-check/): the
# nvidia-smi outputs as tests/fixtures keep them, and gpu-check.json.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-check}
py=${PYTHON:-python3}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader | tee "$out/smi-query.csv"
nvidia-smi topo -m | tee "$out/smi-topo.txt"
"$py" - "$out" <<'EOF'
import json
import subprocess
import sys
import time
from pathlib import Path

from jobs.engines.fingerprint import PROBE, host_fingerprint
from jobs.evidence.collectives import run_probe
from jobs.evidence.probe_input import ProbeRequest, gpu_count

out = Path(sys.argv[1])
report = {}
began = time.monotonic()
report["fingerprint"] = host_fingerprint(sys.executable, package="sglang")
report["fingerprint_s"] = round(time.monotonic() - began, 2)
report["probe_json"] = subprocess.run([sys.executable, "-c", PROBE, "sglang"], text=True,
                                      capture_output=True, check=False).stdout
report["gpu_count"] = gpus = gpu_count()
world = gpus if gpus >= 2 else 1
sizes = (4096, 1 << 20, 64 << 20, 256 << 20)
began = time.monotonic()
try:
    report["nccl_probe"] = run_probe(ProbeRequest(world=world, backend="nccl", sizes=sizes,
                                                  iters=20, timeout_s=180))
except Exception as error:  # the report says what failed; the rest still stands
    report["nccl_probe_error"] = f"{type(error).__name__}: {error}"
report["nccl_probe_s"] = round(time.monotonic() - began, 2)
(out / "gpu-check.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
print(json.dumps(report, indent=1, default=str))
EOF
echo "--- the CLI on this host"
"$py" -m bot.cli.main probe --world 2 --sizes 4K,1M --iters 5; echo "exit $?"
"$py" -m bot.cli.main probe --backend nccl --world 2 --sizes 4K; echo "exit $?"
