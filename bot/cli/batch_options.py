"""The options every command that starts a batch and waits for it spells alike (`run`, `bisect`,
`watch add`, `watch run`): `--set`, `--reps` and `--timeout`, each added here once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

DAY_S = 24 * 3600.0


def add_sets(parser: Any, help: str) -> None:
    """`--set KNOB=VALUE`, repeatable, gathered in `sets`."""
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KNOB=VALUE",
                        help=help)


def add_reps(parser: Any) -> None:
    """`--reps N`: repetitions per configuration (None: the preset's)."""
    parser.add_argument("--reps", type=int, metavar="N",
                        help="repetitions per configuration, 1 to 20 (default: the preset's)")


def add_wait(parser: Any, seconds: Callable[[str], float]) -> None:
    """`--timeout S`: how long to wait for the batch (default: a day)."""
    parser.add_argument("--timeout", type=seconds, default=DAY_S, metavar="S",
                        help="give up after S seconds, at most 604800 (default: 24 hours)")
