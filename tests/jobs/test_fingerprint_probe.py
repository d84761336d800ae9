"""The fingerprint's version probe (issue 19: it took seconds of every batch on `import torch`):
the same versions as importing SGLang and torch gives, read without the imports where that is
exact (SGLang from its installation's metadata, a CPU build of torch from its version.py), and
imported as before where it is not (a GPU build's NCCL version, an SGLang without metadata).
Run with real interpreters against this host's torch and against fake installations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from jobs.engines.fingerprint import PROBE, parse_probe
from tests.builders import needs
from tests.standin.harness import STANDIN

# What the probe stands for: import both and ask them (the probe before issue 19).
BY_IMPORT = """\
import json
out = {}
try:
    import sglang
    out["sglang"] = str(sglang.__version__)
except Exception:
    pass
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


def probe(code: str, *, path: list[Path], isolated: bool = False) -> tuple[str, set[str]]:
    """The probe's output and the modules it imported (Python's own `-X importtime` log), run by
    a real interpreter with `path` on PYTHONPATH (`isolated`: without site-packages, so only
    the fake installations there are found)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, path))}
    argv = [sys.executable, *(["-S"] if isolated else []), "-X", "importtime", "-c", code,
            "sglang"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120,
                          check=True)
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    return done.stdout, imported


@needs("torch")  # the venv's CPU build of torch, imported in the reference's subprocess
def test_this_hosts_versions_are_those_the_imports_give() -> None:
    fast, light = probe(PROBE, path=[STANDIN])
    slow, heavy = probe(BY_IMPORT, path=[STANDIN])
    assert parse_probe(fast) == parse_probe(slow)
    assert parse_probe(fast)["torch"] and parse_probe(fast)["sglang"]
    assert "torch" in heavy and "torch" not in light  # no `import torch` (seconds) in it


def fake_torch(site: Path, *, cuda: str | None, marker: Path) -> None:
    """A torch package whose import leaves `marker`; its version.py as torch 2.x writes it."""
    package = site / "torch"
    (package / "cuda").mkdir(parents=True)
    (package / "version.py").write_text(
        "from typing import Optional\n\n"
        "__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']\n"
        f"__version__ = '2.9.1{'+cpu' if cuda is None else '+cu' + cuda.replace('.', '')}'\n"
        f"debug = False\ncuda: Optional[str] = {cuda!r}\ngit_version = 'abc'\n"
        "hip: Optional[str] = None\nrocm: Optional[str] = None\nxpu: Optional[str] = None\n")
    (package / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n"
        "from torch import version, cuda\nfrom torch.version import __version__\n")
    (package / "cuda" / "__init__.py").write_text("from torch.cuda import nccl\n")
    (package / "cuda" / "nccl.py").write_text(  # a CPU build has no NCCL: it raises, as real
        "def version():\n    return (2, 21, 5)\n" if cuda else
        "def version():\n    raise AttributeError(\"no attribute '_nccl_version'\")\n")


def test_a_cpu_build_of_torch_is_read_not_imported(tmp_path: Path) -> None:
    marker = tmp_path / "torch-imported"
    fake_torch(tmp_path / "site", cuda=None, marker=marker)
    fast, _ = probe(PROBE, path=[tmp_path / "site"], isolated=True)
    assert not marker.exists()
    slow, _ = probe(BY_IMPORT, path=[tmp_path / "site"], isolated=True)
    assert marker.exists()
    assert parse_probe(fast) == parse_probe(slow) == {"torch": "2.9.1+cpu", "cuda": None}


def test_a_gpu_build_of_torch_is_imported_for_its_nccl(tmp_path: Path) -> None:
    marker = tmp_path / "torch-imported"
    fake_torch(tmp_path / "site", cuda="12.8", marker=marker)
    out, _ = probe(PROBE, path=[tmp_path / "site"], isolated=True)
    assert marker.exists()
    assert parse_probe(out) == {"torch": "2.9.1+cu128", "cuda": "12.8", "nccl": "2.21.5"}


def test_an_unreadable_version_file_falls_back_to_the_import(tmp_path: Path) -> None:
    marker = tmp_path / "torch-imported"
    fake_torch(tmp_path / "site", cuda=None, marker=marker)
    (tmp_path / "site" / "torch" / "version.py").write_text("__version__ = get()\ncuda = None\n"
                                                           "def get(): return 'x'\n")
    (tmp_path / "site" / "torch" / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n__version__ = '2.9.1+cpu'\n"
        "class version:\n    cuda = None\n")
    out, _ = probe(PROBE, path=[tmp_path / "site"], isolated=True)
    assert marker.exists()
    assert parse_probe(out) == {"torch": "2.9.1+cpu", "cuda": None}


def test_an_installed_sglang_is_read_from_its_metadata_and_a_source_tree_imported(
    tmp_path: Path,
) -> None:
    site, marker = tmp_path / "site", tmp_path / "sglang-imported"
    (site / "sglang").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n__version__ = '0.5.9'\n")
    info = site / "sglang-0.5.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.9\n")
    out, _ = probe(PROBE, path=[site], isolated=True)
    assert json.loads(out.splitlines()[-1]) == {"sglang": "0.5.9"}
    assert not marker.exists()
    (info / "METADATA").unlink()
    info.rmdir()  # a source tree: no metadata, imported
    out, _ = probe(PROBE, path=[site], isolated=True)
    assert json.loads(out.splitlines()[-1]) == {"sglang": "0.5.9"} and marker.exists()


def test_metadata_elsewhere_on_the_path_is_not_the_package_s(tmp_path: Path) -> None:
    """An editable install's metadata lies in site-packages, its package in the source tree: the
    package is imported for its version, as from a source tree; an egg-info beside the package
    (`setup.py develop`) is its own metadata, read without the import."""
    source, site, marker = tmp_path / "src", tmp_path / "site", tmp_path / "sglang-imported"
    (source / "sglang").mkdir(parents=True)
    (source / "sglang" / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n__version__ = '0.5.10.dev0'\n")
    info = site / "sglang-0.5.9.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.9\n")
    out, _ = probe(PROBE, path=[source, site], isolated=True)
    assert json.loads(out.splitlines()[-1]) == {"sglang": "0.5.10.dev0"} and marker.exists()
    marker.unlink()
    egg = source / "sglang.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.10\n")
    out, _ = probe(PROBE, path=[source, site], isolated=True)
    assert json.loads(out.splitlines()[-1]) == {"sglang": "0.5.10"} and not marker.exists()
