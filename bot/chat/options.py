"""The options of a chat line's words (the router's commands): `--flag`, `--flag VALUE` (or
`--flag=VALUE`) given at most once, and `--set`, `--reps` and the positional words. Only the
syntax is read here; the commands (`jobs.commands`) check values."""

from __future__ import annotations

from jobs.errors import UserError

SHOWN_CHARS = 40  # of an unknown word quoted back in an answer


def flag(args: list[str], name: str) -> tuple[bool, list[str]]:
    """Whether `name` (an option without a value) is among `args`, and the rest."""
    return name in args, [a for a in args if a != name]


def valued(args: list[str], name: str, *, usage: str) -> tuple[str | None, list[str]]:
    """The value of `name VALUE` (or `name=VALUE`), given at most once, and the other words."""
    found: list[str] = []
    rest: list[str] = []
    words = iter(args)
    for word in words:
        option, eq, inline = word.partition("=")
        if option != name:
            rest.append(word)
            continue
        value = inline if eq else next(words, None)
        if not value or value.startswith("--"):
            raise UserError(f"{name} needs a value; usage: {usage}")
        found.append(value)
    if len(found) > 1:
        raise UserError(f"{name} is given {len(found)} times; give it once")
    return (found[0] if found else None), rest


def number(value: str | None, name: str) -> float | None:
    """An option's value as a number (None: not given)."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        raise UserError(f"{name} needs a number, got {value[:SHOWN_CHARS]!r}") from None


def parse_options(args: list[str], *, usage: str) -> tuple[str, list[str], int | None, list[str]]:
    """(first positional, --set values, --reps, positionals) of a command's arguments."""
    sets: list[str] = []
    reps: int | None = None
    rest: list[str] = []
    words = iter(args)
    for word in words:
        option, eq, inline = word.partition("=")
        if option in ("--set", "--reps"):
            value = inline if eq else next(words, None)
            if value is None:
                raise UserError(f"{option} needs a value; usage: {usage}")
            if option == "--set":
                sets.append(value)
            else:
                try:
                    reps = int(value)
                except ValueError:
                    raise UserError(f"--reps needs a whole number, got {value!r}") from None
        elif word.startswith("--"):
            raise UserError(f"unknown option {option!r}; usage: {usage}")
        else:
            rest.append(word)
    if not rest:
        raise UserError(f"usage: {usage}")
    return rest[0], sets, reps, rest
