"""Command-line flags from a plan's knobs, one spelling for every engine and its preflight."""

from __future__ import annotations


def to_flag(key: str) -> str:
    """A preset's server-arg key as a command-line flag: `tp_size` and `tp-size` -> `--tp-size`."""
    return "--" + key.lstrip("-").replace("_", "-")
