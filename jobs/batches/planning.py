"""Planning a batch: a preset resolved into a plan, its flags checked, and stored as queued."""

from __future__ import annotations

import secrets

from jobs import settings
from jobs.core.bench_checks import bench_problems, metric_problems
from jobs.core.errors import KnobError, PresetError, UserError
from jobs.core.loads import slo_problems
from jobs.core.plans import BatchPlan, resolve
from jobs.core.presets import Scalar, load_preset
from jobs.core.secret_refs import (
    first_literal_secret,
    first_literal_secret_arg,
    literal_secret_arg_reason,
    literal_secret_reason,
)
from jobs.engines.base import Engine
from jobs.store import BatchRow, Store


def new_batch_id() -> str:
    return f"b-{secrets.token_hex(4)}"


def plan_batch(
    preset: str,
    *,
    engine: str | None = None,
    overrides: dict[str, Scalar] | None = None,
    reps: int | None = None,
    queue: str | None = None,
) -> BatchPlan:
    """Load and resolve a preset into a plan (raises UserError subclasses: exit 2)."""
    loaded = load_preset(preset)
    if engine is not None and engine != loaded.engine:
        loaded = loaded.model_copy(update={"engine": engine})
        # the keys the preset's engine reports may not be another's (total_throughput)
        for _, message in [*metric_problems(loaded.metric, engine=engine),
                           *bench_problems(loaded.bench, engine=engine),
                           *slo_problems(loaded.slo, engine=engine)][:1]:
            raise PresetError(f"{loaded.source}: {message} (--engine {engine})")
    return resolve(
        loaded, overrides=overrides, reps=reps, queue=queue,
        default_queue=settings.default_queue(),
    )


def check_flags(plan: BatchPlan, engine: Engine) -> dict[str, str]:
    """Preflight every configuration; a baseline with an unknown flag refuses the batch."""
    bad = engine.preflight(plan)
    if "baseline" in bad:
        raise UserError(f"the baseline of {plan.preset!r} cannot start: {bad['baseline']}")
    return bad


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


