"""Every value of a plan checked against its engine's flag types before the batch is stored.

The resolved baseline, every approach, the sweep's grid and the bench (`check_values`), and each
`--set` (`override_refusal`, asked by `jobs.core.plans`' one check of a `--set` when the plan is
resolved): a value the engine's argparse would refuse (`threads=abc`, `seed=` with nothing, 2.5
for an integer, a value outside the choices), or that no process can be given (a NUL character
in an argument or an environment value, `=` in an environment name: `check_passable`) is bad
input, exit 2, nothing stored. The types are the engine's own (`jobs.engines.flag_types`), so
this runs on the bot's host too, where no engine is; the worker's preflight checks flags and
choices again against the installed release.
"""

from __future__ import annotations

from typing import Any

from jobs.core.engine_info import describe
from jobs.core.plans import BatchPlan, Refusal, passable_problem
from jobs.core.sweeps import ENV_KNOB
from jobs.engines import type_table
from jobs.engines.flag_types import TypeTable
from jobs.errors import PresetError


def override_refusal(engine: str) -> Refusal | None:
    """Why the engine's flag types refuse a `--set` of a server arg, for `jobs.core.plans`'
    one check of every `--set` (None: the engine has no types). A flag that takes a value is
    never dropped by a `--set` (`seed=null` or `false` would run without it: a number is
    needed)."""
    table = type_table(engine)
    if table is None:
        return None

    def refusal(knob: str, value: Any) -> str | None:
        flag_type = table.lookup(knob)
        if flag_type is None:  # not its business: preflight refuses unknown flags
            return None
        if flag_type.kind != "switch" and (value is None or value is False):
            value = "" if value is None else value
        return flag_type.refusal(knob, value, engine=table.engine)

    return refusal


def check_values(plan: BatchPlan) -> None:
    """Raise PresetError for the first of the preset's own values the plan's engine would
    refuse (a `--set` is checked where the plan is resolved: `override_refusal`)."""
    check_passable(plan)
    check_required(plan)
    table = type_table(plan.engine)
    if table is None:
        return
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


def _refusal(table: TypeTable, key: str, value: Any, *, env: dict[str, str]) -> str | None:
    """Why `key: value` is refused, or None (an env variable or a flag the table does not know
    is not its business: preflight refuses unknown flags)."""
    if key in env or key.isupper():
        return None
    flag_type = table.lookup(key)
    if flag_type is None:
        return None
    return flag_type.refusal(key, value, engine=table.engine)


def check_passable(plan: BatchPlan) -> None:
    """Raise PresetError for a value of the preset no process can be given
    (`jobs.core.plans.passable_problem`; a `--set`'s is checked where the plan is resolved):
    stored, such a batch would fail on the worker."""
    where = f"preset {plan.preset!r}"
    for config in plan.configs:
        what = "baseline" if config.role == "baseline" else f"approach {config.approach!r}"
        for key, value in config.server_args.items():
            if found := passable_problem(key, value, env=False):
                raise PresetError(f"{where}, {what}: {found}")
        for key, value in config.env.items():
            if found := passable_problem(key, value, env=True):
                raise PresetError(f"{where}, {what}: {found}")
    if plan.sweep is not None:
        for key, values in plan.sweep.grid.items():
            for value in values:
                if found := passable_problem(key, value, env=bool(ENV_KNOB.match(key))):
                    raise PresetError(f"{where}, sweep {plan.sweep.name!r}: {found}")
    for key, value in plan.bench.items():
        if found := passable_problem(key, value, env=False):
            raise PresetError(f"{where}, bench: {found}")
