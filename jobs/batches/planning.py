"""Planning a batch: a preset resolved into a plan, its flags checked, and stored as queued."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import overload

from jobs import settings
from jobs.batches.values import override_refusal
from jobs.core.engine_info import describe
from jobs.core.plans import (
    BatchPlan,
    Overrides,
    Preset,
    Scalar,
    bench_problems,
    first_literal_secret,
    first_literal_secret_arg,
    literal_secret_arg_reason,
    literal_secret_reason,
    load_preset,
    metric_problems,
    resolve,
    slo_problems,
    workload_problems,
)
from jobs.core.workloads import read_workload
from jobs.engines.base import Engine
from jobs.errors import KnobError, PresetError, UserError
from jobs.extras import require
from jobs.store import BatchRow, Store


def new_batch_id() -> str:
    return f"b-{secrets.token_hex(4)}"


def plan_batch(
    preset: str | Preset,
    *,
    engine: str | None = None,
    overrides: Overrides | Mapping[str, Scalar] | None = None,
    reps: int | None = None,
    queue: str | None = None,
) -> BatchPlan:
    """Resolve a preset (a name or path, read here; or as a surface read it) into a plan, every
    `--set` checked once against it and its engine's flag types (raises UserError subclasses:
    exit 2)."""
    loaded = load_preset(preset) if isinstance(preset, str) else preset
    if engine is not None and engine != loaded.engine:
        loaded = loaded.model_copy(update={"engine": engine})
        # the keys the preset's engine reports may not be another's (total_throughput)
        for _, message in [*metric_problems(loaded.metric, engine=engine),
                           *bench_problems(loaded.bench, engine=engine),
                           *slo_problems(loaded.slo, engine=engine),
                           *workload_problems(loaded.workload, engine=engine,
                                              bench=loaded.bench, others={})][:1]:
            raise PresetError(f"{loaded.source}: {message} (--engine {engine})")
    return resolve(
        loaded, overrides=overrides, reps=reps, queue=queue,
        default_queue=settings.default_queue(), refusal=override_refusal(loaded.engine),
    )


def check_flags(plan: BatchPlan, engine: Engine) -> dict[str, str]:
    """Preflight every configuration; a baseline with an unknown flag refuses the batch."""
    bad = preflight(plan, engine)
    if "baseline" in bad:
        raise UserError(f"the baseline of {plan.preset!r} cannot start: {bad['baseline']}")
    return bad


def preflight(plan: BatchPlan, engine: Engine) -> dict[str, str]:
    """Approach -> why `engine`, as installed here, refuses it; raises UserError when nothing
    of the plan can run here: an extra it needs is missing (jobs.extras), its workload cannot be
    used (jobs.core.workloads), or the engine says so.
    Where the batch runs: this process in embedded mode, the worker that takes it otherwise."""
    require(*needs(plan))  # before the engine is asked: one line, no traceback
    if plan.workload is not None:  # its file is on this host: read and checked (file:line)
        read_workload(plan.workload)
    return engine.preflight(plan)


@overload
def refusals(engine: Engine, plan: BatchPlan) -> dict[str, str]: ...


@overload
def refusals(engine: Engine, plan: BatchPlan, *, point: str) -> str | None: ...


def refusals(
    engine: Engine, plan: BatchPlan, *, point: str | None = None
) -> dict[str, str] | str | None:
    """Approach -> why the installed engine refuses it; a preflight that cannot run at all (no
    engine to ask) refuses the baseline. A sweep's `point` is checked alone, as it is about to
    start (its plan's one configuration): none starts with a flag refused, and a sweep of
    thousands of points checks only those its search proposes."""
    try:
        bad = preflight(plan, engine)  # what this host lacks refuses it too (jobs.extras)
    except UserError as exc:
        return {"baseline": str(exc)} if point is None else str(exc)
    return bad if point is None else bad.get(point)


def needs(plan: BatchPlan) -> list[tuple[str, str]]:
    """The extras the host that runs `plan` must have (jobs.extras), with what needs each: its
    engine's (`extra` in its engine.yaml), and the search's for an adaptive sweep."""
    info = describe(plan.engine)
    found = [(info.extra, info.in_text)] if info.extra else []
    if plan.sweep is not None and plan.sweep.search == "adaptive":
        found.append(("search", "an adaptive sweep (Optuna's sampler)"))
    return found


def submit(
    plan: BatchPlan,
    *,
    store: Store,
    requested_by: str,
    channel: str | None = None,
    idempotency_key: str | None = None,
) -> tuple[BatchRow, bool]:
    """Store a new queued batch (or find the one this idempotency key already made); a plan
    that holds a secret in clear is refused, whatever built it (docs/contracts.md "Secrets
    stay references": env, server args and a probe's env)."""
    configs = (*plan.configs, *plan.points)
    probe_env = dict((plan.probe or {}).get("env") or ())
    knob = first_literal_secret([*(c.env for c in configs), probe_env])
    if knob is not None:
        raise KnobError(literal_secret_reason(knob))
    arg = first_literal_secret_arg(c.server_args for c in configs)
    if arg is not None:
        raise KnobError(literal_secret_arg_reason(arg))
    return store.create_batch(
        batch_id=new_batch_id(), preset=plan.preset, engine=plan.engine, queue=plan.queue,
        requested_by=requested_by, plan=plan, channel=channel,
        idempotency_key=idempotency_key,
    )


