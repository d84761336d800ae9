"""The engine interface: a resolved configuration in, a run record (SPEC.md) out."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from jobs.core.plans import BatchPlan, RunConfig
from jobs.core.records import RunRecord

# Called with a phase name and details: ("launching", {}), ("ready", {}),
# ("repetition", {"rep": 2, "of": 3}), ("stopping", {}).
PhaseCallback = Callable[[str, dict[str, Any]], None]
# Polled while a configuration runs; True means: stop the process group now (a cancel).
StopCheck = Callable[[], bool]


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
    """The run record of one configuration, as SPEC.md lays it out."""
    measured: dict[str, Any] = {ctx.plan.metric: [], "accept_length": None}
    measured.update(metrics or {})
    return RunRecord(
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
    )
