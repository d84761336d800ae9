"""The words of a chat `probe` line read into `ProbeArgs`: `--world N`, `--backend B`,
`--sizes BYTES,...`, `--iters N`, `--env KEY=VALUE` (repeatable) and `--timeout S`, each as
`--option VALUE` or `--option=VALUE`. Only the syntax is read here; `jobs.commands.probe`
checks the values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobs.commands.probe import ProbeArgs
from jobs.errors import UserError
from jobs.evidence.probe_input import parse_sizes

USAGE = ("probe [--world N] [--backend nccl|gloo] [--sizes BYTES,...] [--iters N] "
         "[--env KEY=VALUE]... [--timeout S]")


def _whole(option: str) -> Callable[[str], int]:
    def read(value: str) -> int:
        try:
            return int(value)
        except ValueError:
            raise UserError(f"{option} needs a whole number, got {value!r}") from None
    return read


def _seconds(value: str) -> float:
    try:
        return float(value.removesuffix("s"))
    except ValueError:
        raise UserError(f"--timeout needs a number of seconds, got {value!r}") from None


_READERS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "--world": ("world", _whole("--world")),
    "--backend": ("backend", str),
    "--sizes": ("sizes", parse_sizes),
    "--iters": ("iters", _whole("--iters")),
    "--timeout": ("timeout_s", _seconds),
}


def parse_probe(args: list[str]) -> ProbeArgs:
    """The probe's arguments; UserError (exit 2) for an unknown option, a missing value or a
    word that is not an option."""
    fields: dict[str, Any] = {}
    env: list[str] = []
    words = iter(args)
    for word in words:
        option, eq, inline = word.partition("=")
        if option not in _READERS and option != "--env":
            what = "unknown option" if word.startswith("-") else "unexpected word"
            raise UserError(f"{what} {word[:40]!r}; usage: {USAGE}")
        value = inline if eq else next(words, None)
        if value is None:
            raise UserError(f"{option} needs a value; usage: {USAGE}")
        if option == "--env":
            env.append(value)
            continue
        name, read = _READERS[option]
        if name in fields:
            raise UserError(f"{option} is given twice; usage: {USAGE}")
        fields[name] = read(value)
    return ProbeArgs(**fields, env=tuple(env))
