"""The host fingerprint, parsed from recorded `nvidia-smi` output and the version probe."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from jobs.core.stack import FINGERPRINT_KEYS
from jobs.engines.fingerprint import host_fingerprint, parse_probe, to_fingerprint, to_interconnect
from tests.standin.harness import make_standin

RTX_CSV = "NVIDIA RTX PRO 6000 Blackwell Server Edition, 580.82.07, 12.0\n" * 8
# `nvidia-smi topo -m` on an 8x RTX PRO 6000 PCIe host (two sockets, two NICs); the header is
# underlined with ANSI codes when nvidia-smi thinks it writes to a terminal.
_RTX_HEADER = "\t".join(
    [f"GPU{i}" for i in range(8)] + ["NIC0", "NIC1", "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
)
RTX_TOPO = "\n".join([
    f"\t\x1b[4m{_RTX_HEADER}\x1b[0m",
    "GPU0\t X \tPIX\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\tNODE\tSYS\t0-47,96-143\t0\t\tN/A",
    "GPU1\tPIX\t X \tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\tNODE\tSYS\t0-47,96-143\t0\t\tN/A",
    "GPU2\tNODE\tNODE\t X \tPIX\tSYS\tSYS\tSYS\tSYS\tPIX\tSYS\t0-47,96-143\t0\t\tN/A",
    "GPU3\tNODE\tNODE\tPIX\t X \tSYS\tSYS\tSYS\tSYS\tPIX\tSYS\t0-47,96-143\t0\t\tN/A",
    "GPU4\tSYS\tSYS\tSYS\tSYS\t X \tPIX\tNODE\tNODE\tSYS\tNODE\t48-95,144-191\t1\t\tN/A",
    "GPU5\tSYS\tSYS\tSYS\tSYS\tPIX\t X \tNODE\tNODE\tSYS\tNODE\t48-95,144-191\t1\t\tN/A",
    "GPU6\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\t X \tPIX\tSYS\tPIX\t48-95,144-191\t1\t\tN/A",
    "GPU7\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tPIX\t X \tSYS\tPIX\t48-95,144-191\t1\t\tN/A",
    "NIC0\tNODE\tNODE\tPIX\tPIX\tSYS\tSYS\tSYS\tSYS\t X \tSYS",
    "NIC1\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tPIX\tPIX\tSYS\t X ",
    "",
    "Legend:",
    "",
    "  X    = Self",
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "
    "(e.g., QPI/UPI)",
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges "
    "within a NUMA node",
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host "
    "Bridge)",
    "  PIX  = Connection traversing at most a single PCIe bridge",
    "  NV#  = Connection traversing a bonded set of # NVLinks",
    "",
    "NIC Legend:",
    "",
    "  NIC0: mlx5_0",
    "  NIC1: mlx5_1",
    "",
])
H100_CSV = "NVIDIA H100 80GB HBM3, 550.54.15, 9.0\n" * 8
# An 8x H100 SXM host: every GPU pair joined by 18 NVLinks.
H100_TOPO = "\n".join([
    "\t" + "\t".join([f"GPU{i}" for i in range(8)] + ["NIC0", "CPU Affinity", "NUMA Affinity"]),
    *(
        f"GPU{i}\t" + "\t".join(" X " if j == i else "NV18" for j in range(8))
        + f"\t{'PXB' if i < 4 else 'SYS'}\t{'0-55' if i < 4 else '56-111'}\t{i // 4}"
        for i in range(8)
    ),
    "NIC0\tPXB\tPXB\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\t X ",
    "",
    "Legend:",
    "",
    "  X    = Self",
    "  NV#  = Connection traversing a bonded set of # NVLinks",
    "",
])
SINGLE_CSV = "NVIDIA L4, 570.86.15, 8.9\n"
SINGLE_TOPO = (
    "\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-15\t0\n\nLegend:\n\n  X    = Self\n"
)
PROBE = '{"sglang": "0.5.2", "torch": "2.8.0+cu128", "cuda": "12.8", "nccl": "2.27.3"}\n'


def test_pcie_host() -> None:
    fingerprint = to_fingerprint(smi_csv=RTX_CSV, topo_text=RTX_TOPO, probe_json=PROBE,
                                 package="sglang")
    assert fingerprint == {
        "gpu": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "gpu_count": 8,
        "compute_capability": "12.0", "interconnect": "PCIe", "driver": "580.82.07",
        "cuda": "12.8", "torch": "2.8.0+cu128", "sglang": "0.5.2", "nccl": "2.27.3",
    }
    assert tuple(fingerprint) == (*FINGERPRINT_KEYS, "sglang", "nccl")


def test_nvlink_host() -> None:
    fingerprint = to_fingerprint(smi_csv=H100_CSV, topo_text=H100_TOPO, probe_json=PROBE,
                                 package="sglang")
    assert fingerprint["interconnect"] == "NVLink"
    assert fingerprint["gpu"] == "NVIDIA H100 80GB HBM3" and fingerprint["gpu_count"] == 8
    assert fingerprint["compute_capability"] == "9.0" and fingerprint["driver"] == "550.54.15"


def test_single_gpu_has_no_interconnect() -> None:
    fingerprint = to_fingerprint(smi_csv=SINGLE_CSV, topo_text=SINGLE_TOPO, probe_json=None,
                                 package="sglang")
    assert fingerprint["gpu_count"] == 1 and fingerprint["gpu"] == "NVIDIA L4"
    assert fingerprint["interconnect"] is None
    assert fingerprint["sglang"] is None and fingerprint["torch"] is None


H200 = Path(__file__).resolve().parents[1] / "fixtures" / "h200"


def test_a_real_h200_host_reads_as_it_was_seen() -> None:
    """nvidia-smi's own answers on a one-GPU H200 host, recorded by scripts/gpu-check.sh with
    the version probe's output there (a CUDA build of torch, imported for its NCCL version)."""
    seen = json.loads((H200 / "gpu-check.json").read_text())
    fingerprint = to_fingerprint(smi_csv=(H200 / "smi-query.csv").read_text(),
                                 topo_text=(H200 / "smi-topo.txt").read_text(),
                                 probe_json=seen["probe_json"], package="sglang")
    assert fingerprint == seen["fingerprint"] == {
        "gpu": "NVIDIA H200", "gpu_count": 1, "compute_capability": "9.0", "interconnect": None,
        "driver": "580.159.04", "cuda": "13.0", "torch": "2.11.0+cu130", "sglang": None,
        "nccl": "2.28.9"}
    assert to_interconnect((H200 / "smi-topo.txt").read_text()) is None  # one GPU: no pair


def test_no_gpu_says_so() -> None:
    fingerprint = to_fingerprint(smi_csv=None, topo_text=None, probe_json=None,
                                 package="sglang")
    assert fingerprint == {
        "gpu": "none", "gpu_count": 0, "compute_capability": None, "interconnect": None,
        "driver": None, "cuda": None, "torch": None, "sglang": None, "nccl": None,
    }


def test_interconnect_unknown_without_a_matrix() -> None:
    assert to_interconnect("") is None
    assert to_interconnect("NVIDIA-SMI has failed because it couldn't communicate") is None
    fingerprint = to_fingerprint(smi_csv=RTX_CSV, topo_text=None, probe_json=PROBE,
                                 package="sglang")
    assert fingerprint["gpu_count"] == 8 and fingerprint["interconnect"] is None


def test_probe_tolerates_noise_and_missing_keys() -> None:
    assert parse_probe("Warning: something\n" + PROBE)["nccl"] == "2.27.3"
    assert parse_probe("Traceback (most recent call last):\n") == {}
    partial = to_fingerprint(smi_csv=None, topo_text=None, probe_json='{"sglang": "0.5.2"}',
                             package="sglang")
    assert partial["sglang"] == "0.5.2" and partial["cuda"] is None


def test_host_fingerprint_runs_the_probes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_standin(tmp_path, monkeypatch)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"  # answers like the real one on the PCIe host above
    smi.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"print({RTX_TOPO!r} if sys.argv[1:2] == ['topo'] else {RTX_CSV!r}, end='')\n"
    )
    smi.chmod(0o755)
    python = bin_dir / "python"  # without site-packages: no slow torch import in this test
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    python.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    fingerprint = host_fingerprint(str(python), package="sglang")
    assert fingerprint["gpu_count"] == 8 and fingerprint["interconnect"] == "PCIe"
    assert fingerprint["sglang"] == "0.5.2"  # the stand-in's version, through the probe
    json.dumps(fingerprint)


def test_host_fingerprint_without_nvidia_smi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    fingerprint = host_fingerprint(str(tmp_path / "no-python"), package="sglang")
    assert fingerprint["gpu"] == "none" and fingerprint["gpu_count"] == 0
    assert fingerprint["sglang"] is None
