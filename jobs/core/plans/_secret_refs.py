"""Secrets as references (docs/contracts.md "Secrets stay references").

A preset's env value may be `${NAME}`: only the worker that starts a server reads NAME, from its
own environment (`resolve_env`), so the store, the plan, the events and every output hold the
reference and never the value. A value of a secret-looking env key (TOKEN, KEY, SECRET,
PASSWORD in its name) that is not a reference is refused where a preset is read or a `--set`
applied (`literal_secret_problems`, `literal_secret_reason`). A value that masking would never
hide (`redaction.is_secret_value`: shorter than 4 characters, or a switch such as `false` for
TOKENIZERS_PARALLELISM) holds no secret and may stay literal.

Server args follow the same rule where their name says they hold a secret (`is_secret_arg`:
`api-key`, `hf-token`, `ssl-keyfile-password`; not `max-total-tokens` nor `tokenizer-path`):
a string value is `${NAME}` only, resolved on the worker when the server starts
(`resolve_args`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs.redaction import is_secret_name, is_secret_value

if TYPE_CHECKING:
    from jobs.core.plans._preset_models import Config, Preset

_REFERENCE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)\}")
_ENV_KNOB = re.compile(r"^[A-Z_][A-Z0-9_]*$")  # a sweep grid's env knob (sweeps.ENV_KNOB)
# The line a worker logs for a reference its environment lacks; failure_rules.yaml's
# `env-reference-unset` (bad-config) matches it and diagnosis reads the name from it.
UNSET_LINE = "specbench: env {knob}: ${{{name}}} is not set in the worker's environment"
ARG_UNSET_LINE = ("specbench: server arg {knob}: ${{{name}}} is not set in the worker's "
                  "environment")
# A word of a server arg's name (split at - and _) that ends in one of these names a secret.
_SECRET_ARG_WORDS = ("key", "token", "secret", "password", "passwd")
_ARG_WORD = re.compile(r"[-_.]+")

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


def is_secret_arg(knob: str) -> bool:
    """A server arg whose name says it holds a secret: a word of it ends in key, token, secret,
    password or passwd (`api-key`, `admin-api-key`, `hf-token`, `ssl-keyfile-password`), where
    `max-total-tokens`, `tokenizer-path` or `ssl-keyfile` name none."""
    words = _ARG_WORD.split(knob.strip().lstrip("-").lower())
    return any(word.endswith(_SECRET_ARG_WORDS) for word in words)


def is_literal_secret_arg(knob: str, value: Any) -> bool:
    """A secret-looking server arg given a string in clear (or a list holding one) instead of
    `${NAME}`. Numbers and switches are no secrets (`true` makes a bare flag)."""
    if not is_secret_arg(knob):
        return False
    items = value if isinstance(value, list | tuple) else [value]
    return any(isinstance(item, str) and reference_name(item) is None
               and is_secret_value(item) for item in items)


def literal_secret_arg_reason(knob: str) -> str:
    """The one-line refusal of a literal secret in a server arg, with the hint."""
    name = _ARG_WORD.sub("_", knob.strip().lstrip("-")).upper()
    return (f'server arg {knob} holds a literal secret: write {knob}: "${{{name}}}" (or '
            "another ${NAME}) and set that variable in the worker's environment")


def literal_secret_problems(preset: Preset) -> list[tuple[Loc, str]]:
    """(YAML location, message) for each literal secret of a preset: the baseline's env and
    server args, each approach's, and the knobs of its sweep's grid."""
    out: list[tuple[Loc, str]] = []
    parts: list[tuple[Loc, Config]] = [(("baseline",), preset.baseline)]
    parts += [(("approaches", i), a) for i, a in enumerate(preset.approaches)]
    for loc, part in parts:
        out += [((*loc, "env", knob), literal_secret_reason(knob))
                for knob, value in part.env.items() if is_literal_secret(knob, value)]
        out += [((*loc, "server_args", knob), literal_secret_arg_reason(knob))
                for knob, value in part.server_args.items() if is_literal_secret_arg(knob, value)]
    if preset.sweep is not None:
        for knob, values in preset.sweep.grid.items():
            if _ENV_KNOB.match(knob) and any(is_literal_secret(knob, v) for v in values):
                out.append((("sweep", "grid", knob), "sweep.grid " + literal_secret_reason(knob)))
            elif not _ENV_KNOB.match(knob) and any(is_literal_secret_arg(knob, v) for v in values):
                out.append((("sweep", "grid", knob),
                            "sweep.grid " + literal_secret_arg_reason(knob)))
    return out


def first_literal_secret(envs: Iterable[Mapping[str, Any]]) -> str | None:
    """The first secret-looking knob of `envs` given a literal value (a plan's configurations:
    the last guard before a plan is stored), or None."""
    return next((knob for env in envs for knob, value in env.items()
                 if is_literal_secret(knob, value)), None)


def first_literal_secret_arg(server_args: Iterable[Mapping[str, Any]]) -> str | None:
    """`first_literal_secret` for server args."""
    return next((knob for args in server_args for knob, value in args.items()
                 if is_literal_secret_arg(knob, value)), None)


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


@dataclass(frozen=True)
class ResolvedArgs:
    """A configuration's server args with the references of its secret args read from a
    worker's environment (`resolve_args`)."""

    args: dict[str, Any]  # what the server's command line gets (a missing reference left out)
    values: tuple[str, ...]  # what the references resolved to: never shown, always masked
    unset: tuple[str, ...]  # one ARG_UNSET_LINE per reference the environment lacks


def resolve_args(server_args: Mapping[str, Any], *, environ: Mapping[str, str]) -> ResolvedArgs:
    """`server_args` with each `${NAME}` of a secret arg (`is_secret_arg`; in a list, each
    item) replaced by NAME's value in `environ`; other args are left as they are."""
    resolved: dict[str, Any] = {}
    values: list[str] = []
    unset: list[str] = []
    for knob, value in server_args.items():
        if not is_secret_arg(knob):
            resolved[knob] = value
            continue
        items = list(value) if isinstance(value, list | tuple) else [value]
        out = []
        for item in items:
            name = reference_name(item)
            if name is None:
                out.append(item)
            elif name in environ:
                out.append(environ[name])
                values.append(environ[name])
            else:
                unset.append(ARG_UNSET_LINE.format(knob=knob, name=name))
        if len(out) == len(items):
            resolved[knob] = out if isinstance(value, list | tuple) else out[0]
    return ResolvedArgs(args=resolved, values=tuple(values), unset=tuple(unset))


def reference_values(envs: Iterable[Mapping[str, str]], *, environ: Mapping[str, str],
                     server_args: Iterable[Mapping[str, Any]] = ()) -> tuple[str, ...]:
    """The values the references of `envs` (and of the secret args of `server_args`) resolve
    to in `environ` that masking must hide (`redaction.is_secret_value`), whatever their
    variable's name."""
    found = {environ[name] for env in envs for value in env.values()
             if (name := reference_name(value)) is not None and name in environ}
    found |= {*(v for args in server_args for v in resolve_args(args, environ=environ).values)}
    return tuple(sorted((v for v in found if is_secret_value(v)), key=len, reverse=True))


def masked_args(server_args: Mapping[str, Any]) -> dict[str, Any]:
    """Server args as they may be shown: a secret arg's value in clear (a plan stored before
    the rule) reads ***; a reference is shown as it is."""
    return {k: ("***" if is_literal_secret_arg(k, v) else v) for k, v in server_args.items()}


def literal_arg_values(server_args: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The values in clear of secret args (a plan stored before the rule), to be masked."""
    return tuple({item for args in server_args for knob, value in args.items()
                  if is_literal_secret_arg(knob, value)
                  for item in (value if isinstance(value, list | tuple) else [value])
                  if isinstance(item, str) and is_secret_value(item)
                  and reference_name(item) is None})
