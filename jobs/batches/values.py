"""Every value of a plan checked against its engine's flag types before the batch is stored.

`--set`, the resolved baseline, every approach, the sweep's grid and the bench: a value the
engine's argparse would refuse (`threads=abc`, `seed=` with nothing, 2.5 for an integer, a
value outside the choices), or that no process can be given (a NUL character in an argument or
an environment value, `=` in an environment name: `check_passable`) is bad input, exit 2,
nothing stored. The types are the engine's own (`jobs.engines.flag_types`), so this runs on the
bot's host too, where no engine is; the worker's preflight checks flags and choices again
against the installed release.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jobs.core.engine_info import describe
from jobs.core.plans import BatchPlan
from jobs.core.sweeps import ENV_KNOB
from jobs.engines import type_table
from jobs.engines.flag_types import TypeTable
from jobs.errors import KnobError, PresetError


def check_values(plan: BatchPlan, *, sets: Sequence[str] = ()) -> None:
    """Raise KnobError (a `--set`) or PresetError (the preset's own values) for the first value
    the plan's engine would refuse; `sets` are the raw `KNOB=VALUE` strings, for the message."""
    check_passable(plan)
    check_required(plan)
    table = type_table(plan.engine)
    if table is None:
        return
    raw = {item.partition("=")[0].strip(): item for item in sets}
    for knob, value in plan.overrides.items():
        found = _refusal(table, knob, value, env=plan.baseline.env, override=True)
        if found is not None:
            given = raw.get(knob) or f"{knob}={'' if value is None else value}"
            raise KnobError(f"--set {given}: {found}")
    where = f"preset {plan.preset!r}"
    for config in plan.configs:
        for key, value in config.server_args.items():
            found = _refusal(table, key, value, env=config.env)
            if found is not None:
                what = "baseline" if config.role == "baseline" else f"approach {config.approach!r}"
                raise PresetError(f"{where}, {what}: {found}")
    if plan.sweep is not None:  # a point is its parent's args (above) and grid values: no
        # point is built (docs/contracts.md "Bounded work and any file")
        for key, values in plan.sweep.grid.items():
            for value in values:
                found = None if ENV_KNOB.match(key) else _refusal(table, key, value, env={})
                if found is not None:
                    raise PresetError(f"{where}, sweep {plan.sweep.name!r}: {found}")
    for key, value in plan.bench.items():
        flag_type = table.lookup(key, bench=True)
        found = None if flag_type is None else flag_type.refusal(key, value, engine=table.engine)
        if found is not None:
            raise PresetError(f"{where}, bench: {found}")


def check_required(plan: BatchPlan) -> None:
    """Raise PresetError when a configuration lacks a server arg its engine cannot run without
    (its engine.yaml's `required_args`, e.g. the model a served engine takes as its positional
    argument)."""
    info = describe(plan.engine)
    for config in plan.configs:
        for arg in info.required_args:
            if config.server_args.get(arg) in (None, "", False):
                what = "baseline" if config.role == "baseline" else f"approach {config.approach!r}"
                raise PresetError(f"preset {plan.preset!r}, {what}: {info.title} needs "
                                  f"server_args.{arg}")


def _refusal(
    table: TypeTable, key: str, value: Any, *, env: dict[str, str], override: bool = False
) -> str | None:
    """Why `key: value` is refused, or None (an env variable or a flag the table does not know
    is not its business: preflight refuses unknown flags)."""
    if key in env or key.isupper():
        return None
    flag_type = table.lookup(key)
    if flag_type is None:
        return None
    if override and flag_type.kind != "switch" and (value is None or value is False):
        # `--set seed=null` (or false) would silently drop the flag: a number is needed
        return flag_type.refusal(key, "" if value is None else value, engine=table.engine)
    return flag_type.refusal(key, value, engine=table.engine)


def check_passable(plan: BatchPlan) -> None:
    """Raise KnobError (a `--set`) or PresetError for a value no process can be given: the
    operating system refuses a NUL character in an argument or in the environment, and `=` or
    nothing as an environment variable's name; stored, such a batch would fail on the worker."""
    for knob, value in plan.overrides.items():
        if found := _unpassable(knob, value, env=knob.isupper()):
            raise KnobError(f"--set {knob!r}: {found}")
    where = f"preset {plan.preset!r}"
    for config in plan.configs:
        what = "baseline" if config.role == "baseline" else f"approach {config.approach!r}"
        for key, value in config.server_args.items():
            if found := _unpassable(key, value, env=False):
                raise PresetError(f"{where}, {what}: {found}")
        for key, value in config.env.items():
            if found := _unpassable(key, value, env=True):
                raise PresetError(f"{where}, {what}: {found}")
    if plan.sweep is not None:
        for key, values in plan.sweep.grid.items():
            for value in values:
                if found := _unpassable(key, value, env=bool(ENV_KNOB.match(key))):
                    raise PresetError(f"{where}, sweep {plan.sweep.name!r}: {found}")
    for key, value in plan.bench.items():
        if found := _unpassable(key, value, env=False):
            raise PresetError(f"{where}, bench: {found}")


def _unpassable(key: str, value: Any, *, env: bool) -> str | None:
    """Why `key` and `value` cannot reach a process, or None."""
    if "\x00" in key or (env and ("=" in key or not key)):
        return f"{key!r} cannot be {'an environment variable' if env else 'a flag'}'s name"
    if isinstance(value, str) and "\x00" in value:
        return (f"the value of {key} holds a NUL character (\\x00), which no process can be "
                "given")
    return None
