"""A model's revision, part of a watch's stack (docs/contracts.md "Regression watch", "Series"):
the model dir's `revision` or `commit` file (what a download tool leaves beside the weights; a
Hugging Face snapshot's folder is named by its commit), else a hash of its `config.json`.

A model path that is no folder (a hub name the engine downloads, a folder this host lacks) has
no revision here: None, never an error. The folder comes from the engine's facts
(`evidence.model_arg` in its engine.yaml).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jobs.core.engine_info import describe

REVISION_FILES = ("revision", "commit", ".revision")
MAX_CONFIG_BYTES = 4 << 20
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def model_revision(server_args: Mapping[str, Any], *, engine: str) -> str | None:
    """The revision of the model a configuration serves, or None where it cannot be told."""
    arg = (describe(engine).evidence or {}).get("model_arg")
    folder = server_args.get(str(arg)) if arg else None
    if not isinstance(folder, str) or not folder:
        return None
    return revision_of(Path(folder))


def revision_of(folder: Path) -> str | None:
    try:
        if not folder.is_dir():
            return None
        for name in REVISION_FILES:
            path = folder / name
            if path.is_file():
                first = path.read_text(encoding="utf-8", errors="replace").strip().split()
                if first:
                    return first[0][:64]
        if _COMMIT.match(folder.resolve().name):  # a hub snapshot: snapshots/<commit>/
            return folder.resolve().name
        config = folder / "config.json"
        if config.is_file() and config.stat().st_size <= MAX_CONFIG_BYTES:
            return "config:" + hashlib.sha256(config.read_bytes()).hexdigest()[:12]
    except OSError:
        return None
    return None
