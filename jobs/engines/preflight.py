"""Flag checks before any server starts: every server arg against `launch_server --help`.

The help text is read once per (interpreter, SGLang version) and kept on disk under
`data_dir()/cache`, so a worker pays for `--help` (seconds with a real SGLang) only after an
upgrade. An unknown flag is reported the way argparse would reject it, so the failure rules
classify it as `bad-config`.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from jobs.core.errors import EngineError, UserError
from jobs.core.plans import BatchPlan
from jobs.engines.flags import to_flag as to_flag  # re-exported for jobs.engines.sglang
from jobs.settings import data_dir

PROG = "launch_server.py"  # argparse's prog for `python -m sglang.launch_server`
_VERSION_PROBE = "import sglang; print(sglang.__version__)"
_FLAG = re.compile(r"^--?[A-Za-z0-9][\w.-]*$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_memory: dict[tuple[str, str], frozenset[str]] = {}


def parse_help_flags(help_text: str) -> frozenset[str]:
    """Every option string of an argparse help text (aliases included, usage line ignored)."""
    flags: set[str] = set()
    for raw in _ANSI.sub("", help_text).splitlines():
        stripped = raw.lstrip(" ")
        indent = len(raw) - len(stripped)
        # Option lines are indented by 2 (4 inside some formatters); help text continues at 24.
        if not stripped.startswith("-") or not 1 <= indent <= 8:
            continue
        invocation = re.split(r"\s{2,}", stripped, maxsplit=1)[0]
        for part in invocation.split(", "):
            token = part.split(" ", 1)[0].split("=", 1)[0]
            if _FLAG.match(token):
                flags.add(token)
    return frozenset(flags)


def unknown_flags_reason(server_args: Mapping[str, Any], known: Iterable[str]) -> str | None:
    """Argparse's rejection of the unknown flags among `server_args`, or None if all are known."""
    known_set = set(known)
    unknown = [to_flag(k) for k in server_args if to_flag(k) not in known_set]
    if not unknown:
        return None
    reason = f"{PROG}: error: unrecognized arguments: {' '.join(unknown)}"
    candidates = sorted(f for f in known_set if f.startswith("--"))
    hints = [(flag, hint) for flag in unknown if (hint := _suggest(flag, candidates))]
    if len(unknown) == 1 and hints:
        reason += f" (did you mean {hints[0][1]}?)"
    elif hints:
        reason += " (did you mean " + ", ".join(f"{h} for {f}" for f, h in hints) + "?)"
    return reason


def _suggest(flag: str, candidates: list[str]) -> str | None:
    """A flag renamed by a suffix (`--x` -> `--x-decode`) first, else the closest spelling."""
    longer = [c for c in candidates if c.startswith(flag + "-")][:3]
    if longer:
        return " or ".join(longer)
    close = difflib.get_close_matches(flag, candidates, n=1, cutoff=0.6)
    return close[0] if close else None


def check_plan(plan: BatchPlan, known: Iterable[str]) -> dict[str, str]:
    """Approach name -> argparse-style reason, for every configuration with an unknown flag."""
    known_set = frozenset(known)
    out: dict[str, str] = {}
    for config in plan.configs:
        reason = unknown_flags_reason(config.server_args, known_set)
        if reason is not None:
            out[config.approach] = reason
    return out


def resolve_python(python: str) -> str:
    """The interpreter as an absolute path (not following symlinks: a venv's python is a link)."""
    found = shutil.which(python) if os.sep not in python else python
    if not found or not os.access(found, os.X_OK) or os.path.isdir(found):
        raise UserError(f"SPECBENCH_SGLANG_PYTHON={python}: no such interpreter")
    return os.path.abspath(found)


def sglang_version(python: str) -> str:
    """The SGLang version `python` imports; UserError when it cannot import it."""
    try:
        done = subprocess.run(
            [python, "-c", _VERSION_PROBE],
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        done = None
    lines = done.stdout.strip().splitlines() if done is not None else []
    if done is None or done.returncode != 0 or not lines:
        raise UserError(f"SPECBENCH_SGLANG_PYTHON={python}: cannot import sglang")
    return lines[-1].strip()


def known_flags(python: str) -> tuple[str, frozenset[str]]:
    """(SGLang version, launch_server's flags) for `python`; `--help` runs once per version."""
    path = resolve_python(python)
    version = sglang_version(path)
    key = (path, version)
    if key in _memory:
        return version, _memory[key]
    cache_file = _cache_file(path, version)
    flags = _read_cache(cache_file, path=path, version=version)
    if flags is None:
        flags = _run_help(path)
        _write_cache(cache_file, path=path, version=version, flags=flags)
    _memory[key] = flags
    return version, flags


def clear_memory() -> None:
    """Forget the in-memory flag sets (tests; a long-lived worker after an upgrade)."""
    _memory.clear()


def _run_help(python: str) -> frozenset[str]:
    try:
        done = subprocess.run(
            [python, "-m", "sglang.launch_server", "--help"],
            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"{python} -m sglang.launch_server --help failed: {exc}") from None
    flags = parse_help_flags(done.stdout)
    if done.returncode != 0 or "--port" not in flags:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise EngineError(
            f"{python} -m sglang.launch_server --help exited {done.returncode}: {last}"
        )
    return flags


def _cache_file(path: str, version: str) -> Path:
    digest = hashlib.sha256(f"{path}\0{version}".encode()).hexdigest()[:16]
    return data_dir() / "cache" / f"sglang-flags-{digest}.json"


def _read_cache(cache_file: Path, *, path: str, version: str) -> frozenset[str] | None:
    try:
        data = json.loads(cache_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("python") != path or data.get("version") != version:
        return None
    flags = data.get("flags")
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        return None
    return frozenset(flags)


def _write_cache(cache_file: Path, *, path: str, version: str, flags: frozenset[str]) -> None:
    payload = {"python": path, "version": version, "flags": sorted(flags)}
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        partial = cache_file.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(payload, indent=1), encoding="utf-8")
        partial.replace(cache_file)
    except OSError:
        pass  # a read-only data dir only costs another --help next time
