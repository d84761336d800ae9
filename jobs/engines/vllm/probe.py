"""The installed vLLM: its version and `vllm serve --help=all`, through the shared probe."""

from __future__ import annotations

from collections.abc import Mapping

from jobs.engines import probe
from jobs.engines.probe import LaunchHelp

VLLM = probe.Probe(
    package="vllm",
    variable="SPECBENCH_VLLM_PYTHON",
    help_args=("-m", "vllm.entrypoints.cli.main", "serve", "--help=all"),
    # `python -m vllm.entrypoints.cli.main serve` refuses an unknown flag from its top-level
    # parser: "main.py: error: unrecognized arguments: --X" (0.33.0)
    prog="main.py",
)


def vllm_version(python: str, *, env: Mapping[str, str] | None = None) -> str:
    return probe.engine_version(VLLM, python, env=env)


def known_help(python: str, *, env: Mapping[str, str] | None = None) -> LaunchHelp:
    return probe.known_help(VLLM, python, env=env)
