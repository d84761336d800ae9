"""Batch plans: a preset resolved into one configuration per run (baseline first).

Resolution follows docs/contracts.md: an approach inherits the baseline, then its `extends` chain,
then its own settings; its declared change is what it sets or inherits, or with `declares` only the
listed knobs plus its chain's; `--set` (`Overrides`, checked once by `check_overrides`) applies to
every configuration alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from jobs.core.configs import RunConfig
from jobs.core.configs import is_same_value as _same
from jobs.core.configs import merge_args as _merge
from jobs.core.engine_info import describe
from jobs.core.plans._batch_plan import BatchPlan
from jobs.core.plans._capacity_checks import capacity_warnings, normal_capacity
from jobs.core.plans._loads import normal_loads
from jobs.core.plans._overrides import Overrides, Refusal, check_overrides, is_env_knob
from jobs.core.plans._overrides import env_knobs as envs_of
from jobs.core.plans._preset_models import Approach, Preset, Scalar
from jobs.core.plans._secret_refs import reference_name
from jobs.core.sweeps import Sweep, SweepPlan, baseline_index
from jobs.errors import UserError
from jobs.redaction import is_secret_name


def resolve(
    preset: Preset,
    *,
    overrides: Overrides | Mapping[str, Scalar] | None = None,
    reps: int | None = None,
    queue: str | None = None,
    default_queue: str = "default",
    refusal: Refusal | None = None,
) -> BatchPlan:
    """Resolve a preset into a plan; raises KnobError for a bad `--set` (`check_overrides`, with
    the engine's flag types as `refusal`), UserError for bad reps."""
    overrides = Overrides.of(overrides)
    if reps is not None and reps < 1:
        raise UserError(f"--reps must be at least 1, got {reps}")
    _check_noise(preset, reps=reps or preset.reps)
    check_overrides(preset, overrides, refusal=refusal)
    env_knobs = envs_of(preset)
    by_name = {a.name: a for a in preset.approaches}

    base_args = _merge({}, preset.baseline.server_args)
    base_env = dict(preset.baseline.env)
    _apply(overrides, server_args=base_args, env=base_env, env_knobs=env_knobs)
    configs = [
        RunConfig(
            approach="baseline", role="baseline", parent=None,
            hypothesis="The preset's baseline", change={"server_args": {}, "env": {}},
            server_args=base_args, env=base_env,
        )
    ]
    for approach in preset.approaches:
        chain = _chain(approach, by_name)
        args = dict(base_args)
        env = dict(base_env)
        for link in chain:
            args = _merge(args, link.server_args)
            env.update(link.env)
        _apply(overrides, server_args=args, env=env, env_knobs=env_knobs)
        change = _declared_change(chain, server_args=args, env=env)
        configs.append(
            RunConfig(
                approach=approach.name, role="approach", parent=approach.extends,
                hypothesis=approach.hypothesis, change=change, server_args=args, env=env,
            )
        )
    sweep = None if preset.sweep is None else _resolve_sweep(preset.sweep, configs)
    capacity = normal_capacity(preset.capacity)
    requests = describe(preset.engine).requests_of(preset.bench)
    workload = None if preset.workload is None else preset.workload.model_dump()
    if workload is not None:  # the prompts of each category's benchmark run, at most
        requests = workload["per_category"]
        workload["categories"] = None if workload["categories"] is None \
            else list(workload["categories"])
    return BatchPlan(
        preset=preset.name, engine=preset.engine,
        queue=queue or preset.queue or default_queue,
        metric=preset.metric, lower_is_better=preset.lower_is_better,
        min_effect_pct=preset.min_effect_pct, reps=reps or preset.reps,
        startup_s=preset.timeouts.startup_s, bench_s=preset.timeouts.bench_s,
        warmup=preset.warmup,
        bench=dict(preset.bench), configs=tuple(configs),
        overrides=overrides, warnings=(
            *confound_warnings(configs), *capacity_warnings(capacity, requests=requests)),
        sweep=sweep,
        loads=normal_loads(preset.loads),
        slo={k: float(v) for k, v in (preset.slo or {}).items()},
        evidence=tuple(preset.evidence),
        bracket=preset.bracket, starts=preset.starts, requests=requests, capacity=capacity,
        workload=workload,
    )


def _check_noise(preset: Preset, *, reps: int) -> None:
    """docs/contracts.md "Noise, measured": every start runs a repetition."""
    if preset.starts > reps:
        raise UserError(f"preset {preset.name!r} starts each server {preset.starts} times and "
                        f"runs {reps} repetition{'s' if reps != 1 else ''}: each start needs "
                        f"one (--reps {preset.starts} or more)")


def _resolve_sweep(spec: Sweep, configs: Sequence[RunConfig]) -> SweepPlan:
    """The sweep as the plan keeps it: its grid, not its points. Each point's configuration is
    its parent's (the baseline's or the extended approach's) with the point's values, the
    grid's knobs declared as its change (`jobs.core.sweeps`), built when asked for."""
    plan = SweepPlan(
        name=spec.name, extends=spec.extends, grid={k: list(v) for k, v in spec.grid.items()},
        search=spec.search, budget=spec.budget, confirm_reps=spec.confirm_reps,
    )
    same = None if spec.extends is not None else baseline_index(plan.grid, base=configs[0])
    if same is None:
        return plan
    return dataclasses.replace(plan, same_as_baseline=plan.points.at(same).approach)


def confound_warnings(configs: Sequence[RunConfig]) -> tuple[str, ...]:
    """One warning per undeclared difference from the baseline (the first config)."""
    base = configs[0]
    return tuple(
        f"{config.approach}: {knob} differs from the baseline ({ours} vs {theirs}) "
        "but is not declared: its result will be inconclusive"
        for config in configs[1:]
        for knob, ours, theirs in confounds(
            server_args=config.server_args, env=config.env, change=config.change,
            base_args=base.server_args, base_env=base.env,
        )
    )


def only(plan: BatchPlan, approaches: Sequence[str]) -> BatchPlan:
    """The plan cut to its baseline and the named approaches (a retry), warnings recomputed.
    A sweep's points named are kept as plain approaches; the sweep itself is not."""
    kept = tuple(c for c in plan.configs if c.role == "baseline" or c.approach in approaches)
    if plan.sweep is not None:
        named = {p.index: p.approach for n in approaches if (p := plan.sweep.points.find(n))}
        kept += tuple(plan.config(named[index]) for index in sorted(named))
    return dataclasses.replace(plan, configs=kept, warnings=confound_warnings(kept), sweep=None)


def confounds(
    *,
    server_args: dict[str, Any],
    env: dict[str, str],
    change: dict[str, dict[str, Any]],
    base_args: dict[str, Any],
    base_env: dict[str, str],
) -> list[tuple[str, str, str]]:
    """(knob, approach value, baseline value) for every undeclared difference."""
    found: list[tuple[str, str, str]] = []
    for ours, theirs, declared, is_env in (
        (server_args, base_args, change.get("server_args", {}), False),
        (env, base_env, change.get("env", {}), True),
    ):
        for knob in sorted(set(ours) | set(theirs)):
            if knob in declared or _same(ours.get(knob), theirs.get(knob)):
                continue
            # docs/contracts.md: a secret-looking environment variable's value is never shown.
            secret = is_env and is_secret_name(knob)
            found.append(
                (knob, _show(ours.get(knob), secret=secret), _show(theirs.get(knob), secret=secret))
            )
    return found


def _show(value: Any, *, secret: bool = False) -> str:
    if value is None:
        return "unset"
    return "***" if secret and reference_name(value) is None else str(value)


def _chain(approach: Approach, by_name: dict[str, Approach]) -> list[Approach]:
    """The approach's ancestors, oldest first, then the approach itself."""
    chain = [approach]
    while chain[0].extends is not None:
        chain.insert(0, by_name[chain[0].extends])
    return chain


def _declared_change(
    chain: list[Approach], *, server_args: dict[str, Any], env: dict[str, str]
) -> dict[str, dict[str, Any]]:
    args_knobs: set[str] = set()
    env_knobs: set[str] = set()
    for link in chain:
        if link.declares is None:
            args_knobs.update(link.server_args)
            env_knobs.update(link.env)
        else:
            for knob in link.declares:
                (env_knobs if knob in link.env or knob in env else args_knobs).add(knob)
    # A flag the chain removes (`false`/null) is part of the change too: it reads null.
    removed = {k for link in chain for k, v in link.server_args.items() if v is None or v is False}
    return {
        "server_args": {
            k: server_args.get(k) for k in sorted(args_knobs) if k in server_args or k in removed
        },
        "env": {k: env[k] for k in sorted(env_knobs) if k in env},
    }


def _apply(
    overrides: Overrides,
    *,
    server_args: dict[str, Any],
    env: dict[str, str],
    env_knobs: set[str],
) -> None:
    """The one change a `--set` makes: its value in the configuration's env or server args."""
    for knob, value in overrides.items():
        if is_env_knob(knob, env=env_knobs):
            if value is None:
                env.pop(knob, None)
            else:
                env[knob] = str(value)
        elif value is None or value is False:
            server_args.pop(knob, None)
        else:
            server_args[knob] = value
