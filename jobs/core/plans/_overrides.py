"""`--set KNOB=VALUE` (docs/contracts.md "Command line"): one path for a value.

The words are read once, where a surface reads them (the CLI's argv, a chat line), into
`Overrides` (`parse_sets`); they are checked once, when the plan is resolved against its preset
(`check_overrides`: the knob may be set, its value holds no secret, a process can be given it and
the engine's flag types take it); and the plan carries them as they were given, so that every
message names a value in the words the user typed.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from jobs.core.plans._preset_models import Preset, Scalar
from jobs.core.plans._protected_knobs import PROTECTED_WHY, is_protected_knob
from jobs.core.plans._secret_refs import (
    is_literal_secret,
    is_literal_secret_arg,
    literal_secret_arg_reason,
    literal_secret_reason,
)
from jobs.errors import KnobError

Refusal = Callable[[str, Any], str | None]
"""Why the engine's flag types refuse a server arg's value (None: taken, or no flag they know)."""


@dataclass(frozen=True)
class Override:
    """One `--set`: the knob, its value read as a YAML scalar (`0.80` is 0.8), and the words as
    given (`mem-fraction-static=0.80`), which messages quote."""

    knob: str
    value: Scalar
    given: str

    @classmethod
    def of(cls, knob: str, value: Scalar) -> Override:
        """An override known by its value alone (a stored batch's, retried)."""
        return cls(knob=knob, value=value, given=f"{knob}={'' if value is None else value}")


class Overrides(Mapping[str, Scalar]):
    """A command's `--set`s, each knob once, in the order given: knob -> value."""

    def __init__(self, items: Iterable[Override] = ()) -> None:
        self._items = {item.knob: item for item in items}

    @classmethod
    def of(cls, values: Mapping[str, Any] | None) -> Overrides:
        """`values` as overrides (a stored plan's knob -> value, or overrides already)."""
        if isinstance(values, Overrides):
            return values
        return cls(Override.of(knob, value) for knob, value in (values or {}).items())

    def __getitem__(self, knob: str) -> Scalar:
        return self._items[knob].value

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Overrides({self.to_dict()!r})"

    def given(self, knob: str) -> str:
        """`KNOB=VALUE` as the user gave it."""
        return self._items[knob].given

    def merged(self, newer: Overrides) -> Overrides:
        """These with `newer` over them (a retry's `--set` over the batch's own)."""
        items = dict(self._items)
        items.update(newer._items)
        return Overrides(items.values())

    def to_dict(self) -> dict[str, Scalar]:
        """Knob -> value, as the stored plan keeps them (JSON)."""
        return {knob: item.value for knob, item in self._items.items()}


def parse_sets(words: Sequence[str] | None) -> Overrides:
    """`KNOB=VALUE` words, VALUE read as a YAML scalar (`0.80` is 0.8); a knob set twice is
    refused (which value ran would be a guess: docs/contracts.md "Noise, measured")."""
    items: dict[str, Override] = {}
    for word in words or []:
        knob, sep, raw = word.partition("=")
        knob = knob.strip()
        if not sep or not knob:
            raise KnobError(f"--set needs KNOB=VALUE, got {word!r}")
        if knob in items:
            first = items[knob].given.partition("=")[2]
            raise KnobError(f"--set {knob} is given twice ({first!r}, then {raw!r}): set "
                            "each knob once")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        if isinstance(value, dict | list):
            raise KnobError(f"--set {knob}: VALUE must be a scalar, got {raw!r}")
        items[knob] = Override(knob=knob, value=value, given=word)
    return Overrides(items.values())


def env_knobs(preset: Preset) -> set[str]:
    """The knobs the preset sets in an environment (a `--set` of one goes there too)."""
    knobs = set(preset.baseline.env)
    for approach in preset.approaches:
        knobs.update(approach.env)
    return knobs


def is_env_knob(knob: str, *, env: set[str]) -> bool:
    """Whether a `--set` of `knob` sets an environment variable (else a server arg)."""
    return knob in env or knob.isupper()


def check_overrides(
    preset: Preset, overrides: Overrides, *, refusal: Refusal | None = None,
) -> None:
    """Raise KnobError for the first `--set` the preset or its engine refuses: a protected knob,
    one the preset does not let `--set` change (or does not know: with a did-you-mean), a
    literal secret, a knob its sweep sweeps, a value no process can be given, a value the
    engine's flag types (`refusal`) refuse."""
    known = _known_knobs(preset)
    for knob in overrides:
        if is_protected_knob(knob):  # whatever the preset says (each engine's protected_args)
            raise KnobError(f"knob {knob!r} is never overridable: {PROTECTED_WHY}")
        if knob not in preset.overridable:
            raise KnobError(_not_overridable(preset, knob, known=known))
    env = env_knobs(preset)
    for knob, value in overrides.items():  # docs/contracts.md: secrets stay references
        if is_env_knob(knob, env=env):
            if is_literal_secret(knob, value):
                raise KnobError(f"--set {literal_secret_reason(knob)}")
        elif is_literal_secret_arg(knob, value):
            raise KnobError(f"--set {literal_secret_arg_reason(knob)}")
    if preset.sweep is not None:
        for knob in overrides:
            if knob in preset.sweep.grid:
                raise KnobError(f"knob {knob!r} is swept by {preset.sweep.name!r}: it cannot be "
                                "--set")
    for knob, value in overrides.items():
        if found := passable_problem(knob, value, env=knob.isupper()):
            raise KnobError(f"--set {knob!r}: {found}")
    for knob, value in overrides.items():
        found = None if refusal is None or is_env_knob(knob, env=env) else refusal(knob, value)
        if found is not None:
            raise KnobError(f"--set {overrides.given(knob)}: {found}")


def _not_overridable(preset: Preset, knob: str, *, known: set[str]) -> str:
    allowed = ", ".join(preset.overridable) or "none"
    if knob not in known:
        hint = difflib.get_close_matches(knob, sorted(known), n=1)
        suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
        return (f"unknown knob {knob!r}{suggestion} in preset {preset.name!r}; "
                f"overridable: {allowed}")
    return f"knob {knob!r} is not overridable in preset {preset.name!r}; overridable: {allowed}"


def _known_knobs(preset: Preset) -> set[str]:
    knobs = set(preset.baseline.server_args) | set(preset.overridable) | env_knobs(preset)
    for approach in preset.approaches:
        knobs.update(approach.server_args)
    if preset.sweep is not None:
        knobs.update(preset.sweep.grid)
    return knobs


def passable_problem(key: str, value: Any, *, env: bool) -> str | None:
    """Why `key` and `value` cannot reach a process, or None: the operating system refuses a NUL
    character in an argument or in the environment, and `=` or nothing as an environment
    variable's name."""
    if "\x00" in key or (env and ("=" in key or not key)):
        return f"{key!r} cannot be {'an environment variable' if env else 'a flag'}'s name"
    if isinstance(value, str) and "\x00" in value:
        return (f"the value of {key} holds a NUL character (\\x00), which no process can be "
                "given")
    return None
