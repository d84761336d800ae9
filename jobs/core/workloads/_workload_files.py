"""A workload's file read and checked (docs/contracts.md "Workloads that represent the traffic"):
a JSONL of prompts labelled by task category, on the host where the engine runs.

Each line is `{"category": NAME, "prompt": TEXT}` or `{"category": NAME, "turns": [TEXT, ...]}`
(Spec-Bench's question.jsonl reads as it is: its other keys are ignored, and the first turn is
the prompt, as the engines' own Spec-Bench readers take it). A relative path is under
SPECBENCH_DATA_DIR/workloads/; a name the config dir's `workloads/` folder has (specbench ships
a small workload there) is found there when the data dir has none of that name.

Each category keeps its first `per_category` prompts in file order; the categories are the
preset's, else every category of the file in the order it first names them. What cannot be
used is one WorkloadError naming the file and the line: nothing runs, nothing is stored.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs import settings
from jobs.errors import WorkloadError

MAX_WORKLOAD_BYTES = 64 << 20
"""A workload file: 64 MiB (Spec-Bench's question.jsonl is under 2 MiB)."""
FOLDER = "workloads"


@dataclass(frozen=True)
class Category:
    """One task category of a workload: the prompts a benchmark run sends, in file order."""

    name: str
    prompts: tuple[str, ...]
    available: int  # the prompts the file holds for it (more than `prompts` when capped)


@dataclass(frozen=True)
class Workload:
    """A workload as read: where from, its content's hash, its categories in order."""

    path: str
    sha256: str
    categories: tuple[Category, ...]
    output_len: int

    def summary(self) -> dict[str, Any]:
        """What a record keeps of it: the file, its hash, each category's prompts sent."""
        return {"path": self.path, "sha256": self.sha256, "output_len": self.output_len,
                "categories": [{"category": c.name, "prompts": len(c.prompts)}
                               for c in self.categories]}


def workload_path(path: str) -> Path:
    """Where a preset's `workload.path` is on this host (see the module)."""
    given = Path(path).expanduser()
    if given.is_absolute():
        return given
    found = settings.data_dir() / FOLDER / given
    if not found.exists():
        shipped = settings.config_dir() / FOLDER / given
        if shipped.is_file():
            return shipped
    return found


def read_workload(spec: Mapping[str, Any]) -> Workload:
    """The workload a plan's `workload` names, read and checked (raises WorkloadError)."""
    path = workload_path(str(spec["path"]))
    shown = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_WORKLOAD_BYTES:
            raise WorkloadError(f"workload {shown}: {size:,} bytes; a workload file is at most "
                                f"{MAX_WORKLOAD_BYTES >> 20} MiB")
        data = path.read_bytes()
    except FileNotFoundError:
        raise WorkloadError(f"workload {shown}: no such file (a relative workload.path is "
                            f"under SPECBENCH_DATA_DIR/{FOLDER}/)") from None
    except OSError as exc:
        raise WorkloadError(f"workload {shown}: cannot be read ({exc.strerror or exc})") from None
    found = parse_workload(data, source=shown)
    names = list(spec.get("categories") or found)
    chosen = []
    for name in names:
        prompts = found.get(name, [])
        if not prompts:
            raise WorkloadError(f"workload {shown}: category {name!r} (workload.categories) has "
                                f"no prompts; the file's categories: {', '.join(found)}")
        per = int(spec.get("per_category") or len(prompts))
        chosen.append(Category(name, tuple(prompts[:per]), len(prompts)))
    return Workload(path=shown, sha256=hashlib.sha256(data).hexdigest(),
                    categories=tuple(chosen), output_len=int(spec.get("output_len") or 256))


def parse_workload(data: bytes, *, source: str) -> dict[str, list[str]]:
    """Each category's prompts in file order, categories in the order the file names them;
    a line that is no prompt of a category raises WorkloadError naming `source:LINE`."""
    found: dict[str, list[str]] = {}
    for number, raw in enumerate(data.removeprefix(b"\xef\xbb\xbf").split(b"\n"), start=1):
        where = f"{source}:{number}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WorkloadError(f"{where}: not UTF-8 (byte 0x{raw[exc.start]:02x} at column "
                                f"{exc.start + 1})") from None
        if not line.strip():
            continue
        name, prompt = _entry(line, where=where)
        found.setdefault(name, []).append(prompt)
    if not found:
        raise WorkloadError(f"{source}: no prompts at all; a workload is one JSON object a line, "
                            '{"category": ..., "prompt": ...} or {"category": ..., "turns": '
                            "[...]}")
    return found


def _entry(line: str, *, where: str) -> tuple[str, str]:
    try:
        row = json.loads(line)
    except RecursionError:
        raise WorkloadError(f"{where}: nested too deeply") from None
    except ValueError as exc:
        detail = f" ({exc.msg} at column {exc.colno})" if isinstance(exc, json.JSONDecodeError) \
            else ""
        raise WorkloadError(f"{where}: not valid JSON{detail}") from None
    if not isinstance(row, dict):
        raise WorkloadError(f'{where}: a workload line is a JSON object, {{"category": ..., '
                            '"prompt": ...} or {"category": ..., "turns": [...]}')
    name = row.get("category")
    if not isinstance(name, str) or not name.strip():
        raise WorkloadError(f'{where}: no category (each line needs "category": a name)')
    prompt = row.get("prompt")
    if prompt is None and isinstance(row.get("turns"), list) and row["turns"]:
        prompt = row["turns"][0]  # the first turn, as the engines' Spec-Bench readers take it
    if not isinstance(prompt, str) or not prompt.strip():
        raise WorkloadError(f'{where}: no prompt (each line needs "prompt": text, or "turns": '
                            "[text, ...])")
    return name, prompt
