"""The host's fingerprint (docs/contracts.md's keys): GPU, count, driver, compute capability,
interconnect, and the CUDA, torch, engine and NCCL versions the engine's interpreter sees (the
engine's version under its own key: the engine package's `version_key`).

`to_fingerprint` is pure (tested on recorded `nvidia-smi` output); `host_fingerprint` runs the
probes, each of which may fail without failing the others. A host without a GPU says so:
`gpu: "none"`, `gpu_count: 0`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from jobs.engines.installed import INSTALLED

SMI_QUERY = ["nvidia-smi", "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"]
TOPO_QUERY = ["nvidia-smi", "topo", "-m"]
# The versions the engine's interpreter sees, without `import torch` where it can be helped: that
# import takes seconds, and a batch's first records wait for the fingerprint. The engine's
# version is its installation's metadata when that installation is what the import loads (else
# the import, as jobs.engines.probe does); torch's comes from torch/version.py, read, not
# imported, when it is a CPU build (no CUDA, HIP, ROCm or XPU: no NCCL to ask); a GPU build is
# imported for its NCCL version, as before. The keys and values are the same either way.
PROBE = INSTALLED + """\
import ast, importlib, json, sys
out, package = {}, sys.argv[1]
def torch_build():
    try:
        spec = u.find_spec("torch")
        where = list(spec.submodule_search_locations or [])[0]
        with open(os.path.join(where, "version.py"), encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except Exception:
        return {}
    found = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Constant):
            found[target.id] = node.value.value
    return found
dist = installed(package)
version = dist.version if dist is not None else None
if version is None:
    try:
        version = str(importlib.import_module(package).__version__)
    except Exception:
        pass
if version is not None:
    out[package] = version
build = torch_build()
gpu = [build.get(key) for key in ("cuda", "hip", "rocm", "xpu")]
if isinstance(build.get("__version__"), str) and "cuda" in build and gpu == [None] * 4:
    out["torch"], out["cuda"] = build["__version__"], None
else:
    try:
        import torch
        out["torch"] = str(torch.__version__)
        out["cuda"] = torch.version.cuda
        nccl = torch.cuda.nccl.version()
        out["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
    except Exception:
        pass
print(json.dumps(out))
"""
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GPU = re.compile(r"^GPU\d+$")
_NVLINK = re.compile(r"^NV\d+$")


def to_fingerprint(
    *, smi_csv: str | None, topo_text: str | None, probe_json: str | None, package: str,
) -> dict[str, Any]:
    """The fingerprint from `nvidia-smi --query-gpu`, `nvidia-smi topo -m` and the probe's JSON;
    `package` is the engine's version key."""
    gpus = parse_gpus(smi_csv or "")
    names = list(dict.fromkeys(name for name, _, _ in gpus))
    versions = parse_probe(probe_json or "")
    return {
        "gpu": " + ".join(names) if names else "none",
        "gpu_count": len(gpus),
        "compute_capability": gpus[0][2] if gpus else None,
        "interconnect": to_interconnect(topo_text or "") if len(gpus) > 1 else None,
        "driver": gpus[0][1] if gpus else None,
        "cuda": versions.get("cuda"),
        "torch": versions.get("torch"),
        package: versions.get(package),
        "nccl": versions.get("nccl"),
    }


def parse_gpus(smi_csv: str) -> list[tuple[str, str | None, str | None]]:
    """(name, driver, compute capability) per GPU line of the CSV query."""
    gpus: list[tuple[str, str | None, str | None]] = []
    for line in smi_csv.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 3 or not fields[0] or fields[0].lower().startswith("name"):
            continue
        name, driver, cap = fields[0], fields[1], fields[2]
        gpus.append((name, _known(driver), _known(cap)))
    return gpus


def to_interconnect(topo_text: str) -> str | None:
    """`NVLink` when any GPU pair is joined by `NV<n>`, `PCIe` for a matrix without, else None."""
    columns: list[str] = []
    pairs = 0
    for raw in _ANSI.sub("", topo_text).splitlines():
        cells = raw.split()
        if not columns:
            if cells and cells[0] == "GPU0":
                columns = cells
            continue
        if not cells or not _GPU.match(cells[0]):
            continue
        for column, cell in zip(columns, cells[1:], strict=False):
            if not _GPU.match(column) or column == cells[0]:
                continue
            pairs += 1
            if _NVLINK.match(cell):
                return "NVLink"
    return "PCIe" if pairs else None


def parse_probe(probe_json: str) -> dict[str, str | None]:
    """The probe's last JSON line as version strings; anything unreadable is left out."""
    for line in reversed(probe_json.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            return {k: (str(v) if v is not None else None) for k, v in data.items()}
    return {}


def host_fingerprint(python: str, *, package: str,
                     env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Run the probes on this host for the engine `package` that `python` imports, with a
    stack's `env` (docs/contracts.md "Stacks": each stack's versions as its own interpreter
    reports them); each probe that fails leaves its keys unknown."""
    return to_fingerprint(
        smi_csv=_output(SMI_QUERY),
        topo_text=_output(TOPO_QUERY),
        probe_json=_output([python, "-c", PROBE, package], env=env),
        package=package,
    )


def _output(argv: Sequence[str], timeout_s: float = 60.0, *,
            env: Mapping[str, str] | None = None) -> str | None:
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout_s,
            stdin=subprocess.DEVNULL, env={**os.environ, **env} if env else None,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _known(value: str) -> str | None:
    return None if not value or value.startswith("[") or value.upper() == "N/A" else value
