"""The engine interface: a resolved configuration in, a run record (docs/contracts.md) out."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

from jobs.core.capacity import CAPACITY
from jobs.core.plans import (
    BatchPlan,
    RunConfig,
    literal_arg_values,
    masked_args,
    reference_values,
    resolve_args,
    resolve_env,
)
from jobs.core.records import RunRecord
from jobs.redaction import redact, redact_env, secret_values

# Called with a phase name and details: ("launching", {}), ("ready", {}), ("warmup", {"of": 3})
# when the plan has one, ("repetition", {"rep": 2, "of": 3}), ("stopping", {}); and after each
# bench pass ("result", {"rep": 2, "of": 3, "metric": name, "value": float | None}), with
# "warmup": True (and rep 0) for the warm-up, "why" for a repetition that is no sample.
PhaseCallback = Callable[[str, dict[str, Any]], None]
# Polled while a configuration runs; True means: stop the process group now (a cancel).
StopCheck = Callable[[], bool]
T = TypeVar("T")


@dataclass(frozen=True)
class RunContext:
    """What an engine needs besides the configuration."""

    batch_id: str
    plan: BatchPlan
    log_path: Path
    fingerprint: dict[str, Any]  # may be empty: the batch sets the host fingerprint on the record
    on_phase: PhaseCallback
    should_stop: StopCheck
    # The batch's baseline record once it has run (engines that check losslessness compare
    # against it); None for the baseline itself or when it is not known.
    baseline: RunRecord | None = None
    # After each repetition but the last, with the metric's samples so far: True ends the
    # repetitions there (a sweep's point that can no longer beat the best; engines that run
    # their repetitions in one child process may ignore it).
    stop_early: Callable[[list[float]], bool] | None = None


class Engine(Protocol):
    name: str

    def preflight(self, plan: BatchPlan) -> dict[str, str]:
        """Approach name -> why it cannot start (an unknown flag: `bad-config`), before any run."""
        ...

    def fingerprint(self) -> dict[str, Any]:
        """The host: GPU, count, driver, compute capability, interconnect, library versions."""
        ...

    def run(self, config: RunConfig, ctx: RunContext) -> RunRecord:
        """Run one configuration in its own process tree; never raises for a failing server."""
        ...


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def to_run_record(
    config: RunConfig,
    ctx: RunContext,
    *,
    status: str,
    started_at: str,
    exit_code: int | None = None,
    log_tail: str = "",
    metrics: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> RunRecord:
    """The run record of one configuration, as docs/contracts.md lays it out, masked (`mask_record`)
    with the secrets of this process's environment and the configuration's."""
    # a capacity is no bench figure: the record's `capacity` holds it (jobs.core.capacity)
    measured: dict[str, Any] = {ctx.plan.metric: [], "accept_length": None} \
        if ctx.plan.metric != CAPACITY else {"accept_length": None}
    measured.update(metrics or {})
    record = RunRecord(
        batch=ctx.batch_id,
        preset=ctx.plan.preset,
        approach=config.approach,
        role=config.role,
        parent=config.parent,
        hypothesis=config.hypothesis,
        change=config.change,
        server_args=config.server_args,
        env=config.env,
        status=status,
        exit_code=exit_code,
        log_tail=log_tail,
        metrics=measured,
        fingerprint=ctx.fingerprint,
        started_at=started_at,
        finished_at=now_iso(),
        extra=extra or {},
        engine=ctx.plan.engine,
    )
    return mask_record(record, secrets=worker_secrets(config.env, server_args=[config.server_args]))


def to_stored(record: RunRecord, plan: BatchPlan) -> RunRecord:
    """A record as the worker stores it: masked with the secrets of its own environment and of
    every configuration of the batch, whatever process shows it later."""
    return mask_record(record, secrets=plan_secrets(plan))


def worker_secrets(*envs: Mapping[str, str],
                   server_args: Iterable[Mapping[str, Any]] = ()) -> tuple[str, ...]:
    """What this process must never show: the secret-looking values of its own environment
    and of `envs` (configurations' env), and every value their `${NAME}` references (and those
    of the secret args of `server_args`) resolve to here, whatever NAME is (docs/contracts.md
    "Secrets stay references"); longest first."""
    server_args = list(server_args)
    found = {*secret_values(os.environ, *envs), *literal_arg_values(server_args),
             *reference_values(envs, environ=os.environ, server_args=server_args)}
    return tuple(sorted(found, key=len, reverse=True))


def plan_secrets(plan: BatchPlan) -> tuple[str, ...]:
    """`worker_secrets` of every configuration of a plan, its sweep's points included."""
    configs = (*plan.configs, *plan.points)
    return worker_secrets(*(c.env for c in configs),
                          server_args=[c.server_args for c in configs])


@dataclass(frozen=True)
class ServerEnv:
    """The environment a configuration's server starts with, resolved at process start."""

    env: dict[str, str]  # this process's environment, then the configuration's, resolved
    secrets: tuple[str, ...]  # what its output must never show (`worker_secrets`)
    unset: tuple[str, ...]  # one line per `${NAME}` this environment lacks: a bad-config
    config: RunConfig  # the configuration with its secret args' references resolved: only
    # for the server's command line, never for a record (`to_run_record` takes the plan's)

    @property
    def is_complete(self) -> bool:
        return not self.unset


def server_env(config: RunConfig, stack_env: Mapping[str, str] | None = None,
               **extra: str) -> ServerEnv:
    """The configuration's env and secret server args with their references taken from this
    process's environment (the worker's), only now that a server starts; `stack_env` is the
    stack's (docs/contracts.md "Stacks": under the configuration's, which is what is tested),
    `extra` the engine's own settings."""
    resolved = resolve_env(config.env, environ=os.environ)
    args = resolve_args(config.server_args, environ=os.environ)
    env = {**os.environ, **(stack_env or {}), **resolved.env, **extra}
    secrets = worker_secrets(config.env, env, server_args=[config.server_args])
    return ServerEnv(env=env, secrets=secrets, unset=(*resolved.unset, *args.unset),
                     config=dataclasses.replace(config, server_args=args.args))


def mask_record(record: RunRecord, *, secrets: Iterable[str]) -> RunRecord:
    """`record` with env values whose names look secret read *** (docs/contracts.md), and each of
    `secrets` (redaction.secret_values) replaced by *** wherever it appears: log tail, command
    line, server args, extras."""
    shown = tuple(secrets)
    change = {k: (redact_env(v) if k == "env" and isinstance(v, dict) else
                  masked_args(v) if k == "server_args" and isinstance(v, dict) else v)
              for k, v in record.change.items()}
    return dataclasses.replace(
        record,
        hypothesis=_masked(record.hypothesis, shown),
        change=_masked(change, shown),
        server_args=_masked(masked_args(record.server_args), shown),
        env=_masked(redact_env(dict(record.env)), shown),
        log_tail=_masked(record.log_tail, shown),
        fingerprint=_masked(record.fingerprint, shown),
        extra=_masked(record.extra, shown),
    )


def _masked(value: T, secrets: tuple[str, ...]) -> T:
    if not secrets:
        return value
    if isinstance(value, str):
        return cast(T, redact(value, secrets=secrets))
    if isinstance(value, dict):
        return cast(T, {_masked(k, secrets): _masked(v, secrets) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return cast(T, [_masked(v, secrets) for v in value])
    return value
