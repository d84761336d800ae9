"""The installed SGLang: its version and `launch_server --help`, through the shared probe."""

from __future__ import annotations

from collections.abc import Mapping

from jobs.engines import probe
from jobs.engines.probe import LaunchHelp as LaunchHelp
from jobs.engines.probe import clear_memory as clear_memory
from jobs.engines.probe import parse_help_choices as parse_help_choices
from jobs.engines.probe import parse_help_flags as parse_help_flags

SGLANG = probe.Probe(
    package="sglang",
    variable="SPECBENCH_SGLANG_PYTHON",
    help_args=("-m", "sglang.launch_server", "--help"),
    prog="launch_server.py",  # argparse's prog for `python -m sglang.launch_server` before 0.5.14
)


def resolve_python(python: str) -> str:
    return probe.resolve_python(SGLANG, python)


def sglang_version(python: str, *, env: Mapping[str, str] | None = None) -> str:
    return probe.engine_version(SGLANG, python, env=env)


def known_help(python: str, *, env: Mapping[str, str] | None = None) -> LaunchHelp:
    return probe.known_help(SGLANG, python, env=env)


def known_flags(python: str, *, env: Mapping[str, str] | None = None
                ) -> tuple[str, frozenset[str]]:
    return probe.known_flags(SGLANG, python, env=env)
