"""Secrets as references (SPEC.md "Secrets stay references").

A preset's env value may be `${NAME}`: only the worker that starts a server reads NAME, from its
own environment (`resolve_env`), so the store, the plan, the events and every output hold the
reference and never the value. A value of a secret-looking env key (TOKEN, KEY, SECRET,
PASSWORD in its name) that is not a reference is refused where a preset is read or a `--set`
applied (`literal_secret_problems`, `literal_secret_reason`). A value that masking would never
hide (`settings.is_secret_value`: shorter than 4 characters, or a switch such as `false` for
TOKENIZERS_PARALLELISM) holds no secret and may stay literal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs.settings import is_secret_name, is_secret_value

if TYPE_CHECKING:
    from jobs.core.preset_models import Preset

_REFERENCE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)\}")
_ENV_KNOB = re.compile(r"^[A-Z_][A-Z0-9_]*$")  # a sweep grid's env knob (sweeps.ENV_KNOB)
# The line a worker logs for a reference its environment lacks; failure_rules.yaml's
# `env-reference-unset` (bad-config) matches it and diagnosis reads the name from it.
UNSET_LINE = "specbench: env {knob}: ${{{name}}} is not set in the worker's environment"

Loc = tuple[Any, ...]


def reference_name(value: Any) -> str | None:
    """NAME when `value` is exactly `${NAME}`, else None."""
    found = _REFERENCE.fullmatch(value) if isinstance(value, str) else None
    return found.group("name") if found else None


def is_literal_secret(knob: str, value: Any) -> bool:
    """A secret-looking env knob whose value is written out instead of referenced."""
    if not is_secret_name(knob) or value is None or reference_name(value) is not None:
        return False
    return is_secret_value(str(value))


def literal_secret_reason(knob: str) -> str:
    """The one-line refusal of a literal secret, with the hint to write a reference."""
    return (f'env {knob} holds a literal secret: write {knob}: "${{{knob}}}" (or another '
            "${NAME}) and set that variable in the worker's environment")


def literal_secret_problems(preset: Preset) -> list[tuple[Loc, str]]:
    """(YAML location, message) for each literal secret of a preset: the baseline's env, each
    approach's, and the env knobs of its sweep's grid."""
    out: list[tuple[Loc, str]] = []
    places: list[tuple[Loc, Mapping[str, Any]]] = [(("baseline", "env"), preset.baseline.env)]
    places += [(("approaches", i, "env"), a.env) for i, a in enumerate(preset.approaches)]
    for loc, env in places:
        out += [((*loc, knob), literal_secret_reason(knob))
                for knob, value in env.items() if is_literal_secret(knob, value)]
    if preset.sweep is not None:
        for knob, values in preset.sweep.grid.items():
            if _ENV_KNOB.match(knob) and any(is_literal_secret(knob, v) for v in values):
                out.append((("sweep", "grid", knob), "sweep.grid " + literal_secret_reason(knob)))
    return out


def first_literal_secret(envs: Iterable[Mapping[str, Any]]) -> str | None:
    """The first secret-looking knob of `envs` given a literal value (a plan's configurations:
    the last guard before a plan is stored), or None."""
    return next((knob for env in envs for knob, value in env.items()
                 if is_literal_secret(knob, value)), None)


@dataclass(frozen=True)
class ResolvedEnv:
    """A configuration's env with its references read from a worker's environment."""

    env: dict[str, str]  # the values the server gets (a missing reference left out)
    values: tuple[str, ...]  # what the references resolved to: never shown, always masked
    unset: tuple[str, ...]  # one UNSET_LINE per reference the environment lacks

    @property
    def is_complete(self) -> bool:
        return not self.unset


def resolve_env(env: Mapping[str, str], *, environ: Mapping[str, str]) -> ResolvedEnv:
    """`env` with each `${NAME}` replaced by NAME's value in `environ` (the worker's own)."""
    resolved: dict[str, str] = {}
    values: list[str] = []
    unset: list[str] = []
    for knob, value in env.items():
        name = reference_name(value)
        if name is None:
            resolved[knob] = str(value)
        elif name in environ:
            resolved[knob] = environ[name]
            values.append(environ[name])
        else:
            unset.append(UNSET_LINE.format(knob=knob, name=name))
    return ResolvedEnv(env=resolved, values=tuple(values), unset=tuple(unset))


def reference_values(envs: Iterable[Mapping[str, str]], *, environ: Mapping[str, str]
                     ) -> tuple[str, ...]:
    """The values the references of `envs` resolve to in `environ` that masking must hide
    (`settings.is_secret_value`), whatever their variable's name."""
    found = {environ[name] for env in envs for value in env.values()
             if (name := reference_name(value)) is not None and name in environ}
    return tuple(sorted((v for v in found if is_secret_value(v)), key=len, reverse=True))
