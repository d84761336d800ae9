"""What an installed engine is: its version and its server's `--help`, both cached.

Importing a served engine takes seconds, `--help` longer; a worker should pay for them once per
installation, not once per batch. Each engine package names its `Probe` (the package, the
interpreter's variable, the help command line). The version is read from the installation's metadata
(`importlib.metadata`, no import of the engine) and kept, with the path of that METADATA file, in
memory and under `data_dir()/cache`: while the file is unchanged (no upgrade), no process starts
at all. The help text's flags, choices and prog are kept per (interpreter, version). An engine
without metadata (a source folder on PYTHONPATH, the test stand-in) is imported each time.

A stack of the host (docs/contracts.md "Stacks") is an interpreter with an environment of its
own: `env` is added to this process's environment for every probe, and is part of what the
cache is keyed by.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.engines.installed import INSTALLED
from jobs.errors import EngineError
from jobs.settings import data_dir

FORMAT = 2  # of the cache files
_VERSION_PROBE = INSTALLED + """\
import importlib, json, sys
name = sys.argv[1]
found, out = installed(name), None
if found is not None:
    where = getattr(found, "_path", None)
    out = {"version": found.version, "stamp": str(where / "METADATA") if where else None}
if out is None:
    out = {"version": importlib.import_module(name).__version__, "stamp": None}
print(json.dumps(out))
"""
_FLAG = re.compile(r"^--?[A-Za-z0-9][\w.-]*$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CHOICES = re.compile(r"\{([^{}\s]*)\}")
_USAGE = re.compile(r"^usage: (.+?) \[-h\]")


@dataclass(frozen=True)
class Probe:
    """How to ask an interpreter about one engine: `package` is what it imports, `variable` the
    setting that names the interpreter, `help_args` its server's help after `python`, `prog`
    argparse's prog when the usage line shows none, `needs` a flag every real help lists."""

    package: str
    variable: str
    help_args: tuple[str, ...]
    prog: str
    needs: str = "--port"


@dataclass(frozen=True)
class LaunchHelp:
    """One release's server `--help`: its version, flags, choices and prog."""

    version: str
    flags: frozenset[str]
    prog: str  # argparse's, as its refusals start (the engine's Probe says it without a usage line)
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)


_versions: dict[tuple[str, ...], tuple[str, tuple[int, int, int], str]] = {}
_helps: dict[tuple[str, ...], LaunchHelp] = {}


def parse_help_flags(help_text: str) -> frozenset[str]:
    """Every option string of an argparse help text (aliases included, usage line ignored)."""
    return frozenset(_options(help_text))


def parse_help_choices(help_text: str) -> dict[str, tuple[str, ...]]:
    """Flag -> its choices, for the options whose help line shows `{a,b,c}`."""
    return {flag: choices for flag, choices in _options(help_text).items() if choices}


def _options(help_text: str) -> dict[str, tuple[str, ...]]:
    found: dict[str, tuple[str, ...]] = {}
    for raw in _ANSI.sub("", help_text).splitlines():
        stripped = raw.lstrip(" ")
        indent = len(raw) - len(stripped)
        # Option lines are indented by 2 (4 inside some formatters); help text continues at 24.
        if not stripped.startswith("-") or not 1 <= indent <= 8:
            continue
        invocation = re.split(r"\s{2,}", stripped, maxsplit=1)[0]
        shown = _CHOICES.search(invocation)
        choices = tuple(shown.group(1).split(",")) if shown else ()
        for part in invocation.split(", "):
            token = part.split(" ", 1)[0].split("=", 1)[0]
            if _FLAG.match(token):
                found[token] = choices
    return found


def resolve_python(probe: Probe, python: str) -> str:
    """The interpreter as an absolute path (not following symlinks: a venv's python is a link)."""
    found = shutil.which(python) if os.sep not in python else python
    if not found or not os.access(found, os.X_OK) or os.path.isdir(found):
        raise EngineError(f"{probe.variable}={python}: no such interpreter")
    return os.path.abspath(found)


def engine_version(probe: Probe, python: str, *, env: Mapping[str, str] | None = None) -> str:
    """The engine's version `python` has (with the stack's `env`); EngineError when it has none
    (an infrastructure failure: exit 1). Cached, see the module."""
    key = (python, _path_of(env), probe.package, *_env_key(env))
    cached = _versions.get(key) or _read_version(key)
    if cached is not None and _signature(cached[0]) == cached[1]:
        _versions[key] = cached
        return cached[2]
    version, stamp = _probe_version(probe, python, env=env)
    if stamp is not None and (signature := _signature(stamp)) is not None:
        _versions[key] = (stamp, signature, version)
        _write_json(_cache_path(f"{probe.package}-version", *key), {
            "format": FORMAT, "python": python, "pythonpath": key[1], "stamp": stamp,
            "signature": list(signature), "version": version,
        })
    return version


def known_help(probe: Probe, python: str, *, env: Mapping[str, str] | None = None
               ) -> LaunchHelp:
    """The installed engine's server help for `python` (with the stack's `env`); `--help` runs
    once per version."""
    path = resolve_python(probe, python)
    version = engine_version(probe, path, env=env)
    key = (path, version, probe.package, *_env_key(env))
    if key in _helps:
        return _helps[key]
    cache_file = _cache_path(f"{probe.package}-flags", path, version, *_env_key(env))
    found = _read_help(cache_file, path=path, version=version)
    if found is None:
        found = _run_help(probe, path, version, env=env)
        _write_json(cache_file, {
            "format": FORMAT, "python": path, "version": version, "prog": found.prog,
            "flags": sorted(found.flags), "choices": {k: list(v) for k, v in found.choices.items()},
        })
    _helps[key] = found
    return found


def known_flags(probe: Probe, python: str, *, env: Mapping[str, str] | None = None
                ) -> tuple[str, frozenset[str]]:
    """(the engine's version, its server's flags) for `python`."""
    found = known_help(probe, python, env=env)
    return found.version, found.flags


def probe_env(env: Mapping[str, str] | None) -> dict[str, str] | None:
    """The environment a probe of a stack runs with: this process's, then the stack's; None
    (this process's own) without one."""
    return {**os.environ, **env} if env else None


def _env_key(env: Mapping[str, str] | None) -> tuple[str, ...]:
    """What a stack's environment adds to a cache key: nothing without one."""
    if not env:
        return ()
    return (hashlib.sha256(json.dumps(sorted(env.items())).encode()).hexdigest()[:16],)


def _path_of(env: Mapping[str, str] | None) -> str:
    return (env or {}).get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))


def clear_memory() -> None:
    """Forget what this process knows (tests; a new worker process): the disk cache stays."""
    _versions.clear()
    _helps.clear()


def _probe_version(probe: Probe, python: str, *, env: Mapping[str, str] | None = None
                   ) -> tuple[str, str | None]:
    try:
        done = subprocess.run(
            [python, "-c", _VERSION_PROBE, probe.package],
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
            env=probe_env(env),
        )
    except (OSError, subprocess.TimeoutExpired):
        done = None
    lines = done.stdout.strip().splitlines() if done is not None else []
    try:
        data = json.loads(lines[-1]) if done is not None and done.returncode == 0 else None
    except (IndexError, ValueError):
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("version"), str):
        raise EngineError(f"{probe.variable}={python}: cannot import {probe.package}")
    stamp = data.get("stamp")
    return data["version"].strip(), stamp if isinstance(stamp, str) else None


def _run_help(probe: Probe, python: str, version: str, *,
              env: Mapping[str, str] | None = None) -> LaunchHelp:
    shown = " ".join((python, *probe.help_args))
    try:
        done = subprocess.run(
            [python, *probe.help_args],
            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
            env=probe_env(env),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"{shown} failed: {exc}") from None
    flags = parse_help_flags(done.stdout)
    if done.returncode != 0 or probe.needs not in flags:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise EngineError(f"{shown} exited {done.returncode}: {last}")
    usage = _USAGE.match(_ANSI.sub("", done.stdout).lstrip())
    return LaunchHelp(
        version=version, flags=flags, choices=parse_help_choices(done.stdout),
        prog=usage.group(1) if usage else probe.prog,
    )


def _signature(path: str) -> tuple[int, int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size, stat.st_ino


def _cache_path(kind: str, *parts: str) -> Path:
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    return data_dir() / "cache" / f"{kind}-{digest}.json"


def _load_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def _read_version(key: tuple[str, ...]) -> tuple[str, tuple[int, int, int], str] | None:
    data = _load_json(_cache_path(f"{key[2]}-version", *key))
    if data is None or data.get("python") != key[0] or data.get("pythonpath") != key[1]:
        return None
    stamp, signature, version = data.get("stamp"), data.get("signature"), data.get("version")
    if not isinstance(stamp, str) or not isinstance(version, str):
        return None
    if not isinstance(signature, list) or len(signature) != 3:
        return None
    return stamp, (int(signature[0]), int(signature[1]), int(signature[2])), version


def _read_help(cache_file: Path, *, path: str, version: str) -> LaunchHelp | None:
    data = _load_json(cache_file)
    if data is None or data.get("python") != path or data.get("version") != version:
        return None
    flags, choices, prog = data.get("flags"), data.get("choices"), data.get("prog")
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        return None
    if not isinstance(choices, dict) or not isinstance(prog, str):
        return None
    return LaunchHelp(
        version=version, flags=frozenset(flags), prog=prog,
        choices={str(k): tuple(str(c) for c in v) for k, v in choices.items()},
    )


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(payload, indent=1), encoding="utf-8")
        partial.replace(path)
    except OSError:
        pass  # a read-only data dir only costs another probe next time
