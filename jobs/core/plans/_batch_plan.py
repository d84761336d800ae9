"""A batch plan: a preset resolved, as plain data (docs/contracts.md's resolution is
`jobs.core.plans`').

The plan is what travels: stored with its batch, sent through the broker as JSON
(`BatchPlan.to_dict`, `to_plan`), read by the worker that runs it. Its configurations are
`RunConfig`s, baseline first; a sweep keeps its grid and builds its points' configurations
when asked (`jobs.core.sweeps`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from jobs.core.configs import RunConfig
from jobs.core.plans._loads import levels_of
from jobs.core.plans._overrides import Overrides
from jobs.core.sweeps import PointConfigs, SweepPlan, to_sweep_plan
from jobs.errors import UserError

PROBE = "probe"
"""A queued probe's preset and engine: its batch row says `probe` where a batch names its preset
and engine (no engine is registered by that name, so SQL tells probes apart by it)."""


@dataclass(frozen=True)
class BatchPlan:
    """A resolved batch: plain data, JSON-safe, what a worker needs to run it."""

    preset: str
    engine: str
    queue: str
    metric: str
    lower_is_better: bool
    min_effect_pct: float
    reps: int
    startup_s: float
    bench_s: float
    bench: dict[str, Any]
    configs: tuple[RunConfig, ...]
    # the `--set`s as given (`Overrides`, knob -> value); stored as knob -> value
    overrides: Overrides = field(default_factory=Overrides)
    warnings: tuple[str, ...] = ()
    sweep: SweepPlan | None = None
    confirms: str | None = None  # a confirmation batch: the sweep batch whose winner it re-runs
    # start known dead ends anyway (docs/contracts.md "Memory across batches")
    rerun_known: bool = False
    warmup: bool = True  # one unmeasured bench pass before the repetitions (Preset.warmup)
    # {knob: [levels, lowest first]}: every server benchmarked at each (jobs.core.plans)
    loads: dict[str, list[Any]] | None = None
    slo: dict[str, float] = field(default_factory=dict)  # upper limits on result keys
    # {"knob", "from", "max"}: each server's capacity under the SLO searched (jobs.core.capacity)
    capacity: dict[str, Any] | None = None
    # {"path", "categories", "per_category", "output_len"}: each server benchmarked on every
    # category of the workload instead of synthetic prompts (jobs.core.workloads)
    workload: dict[str, Any] | None = None
    evidence: tuple[str, ...] = ()  # what the worker measures before the servers (collectives)
    # a queued collectives probe (`probe` from chat): its request as asked, and no configs
    probe: dict[str, Any] | None = None
    # docs/contracts.md "Noise, measured": the preset's `bracket` (whether a batch of three
    # configurations or more measures its baseline again last: `is_bracketed`), its `starts`
    # per configuration, and the requests one benchmark run sends (None: unknown)
    bracket: bool = False
    starts: int = 1
    requests: int | None = None
    # docs/contracts.md "Stacks": the stack of the host's stacks file the batch runs on (None:
    # the engine's own interpreter setting), and for an upgrade check the stack every
    # configuration runs on again, alternating with the current one
    stack: str | None = None
    against: str | None = None
    # a bisection over stacks (`specbench bisect`): {"approach", "from", "to", "before",
    # "after"}; its probes are batches of their own, run inline, each `part_of` it
    bisect: dict[str, Any] | None = None
    part_of: str | None = None
    # docs/contracts.md "Regression watch": the watch a batch runs for, and the scheduled slot
    # (ISO time) its points are dated by; None for a batch started by hand
    watch: int | None = None
    watch_at: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.overrides, Overrides):  # a stored plan's, or a test's mapping
            object.__setattr__(self, "overrides", Overrides.of(self.overrides))

    @property
    def is_bracketed(self) -> bool:
        """Whether the baseline runs again after every other configuration."""
        servers = len(self.configs) + (self.sweep.max_servers if self.sweep else 0)
        return self.bracket and servers >= 3

    def ran(self) -> dict[str, Any]:
        """What the batch runs with, as every report shows it: the `--set` overrides, the
        repetitions, the starts per configuration, whether the baseline is bracketed."""
        ran = {"overrides": self.overrides.to_dict(), "reps": self.reps, "starts": self.starts,
               "bracket": self.is_bracketed, "warmup": self.warmup}
        ran.update({k: v for k, v in (("stack", self.stack), ("against", self.against)) if v})
        return ran

    @property
    def is_multipoint(self) -> bool:
        """Whether each server is measured at several points: load levels, a capacity search,
        a workload's categories (a sweep's point is then judged at every one of them)."""
        return self.loads is not None or self.capacity is not None or self.workload is not None

    @property
    def is_probe(self) -> bool:
        return self.probe is not None

    @property
    def levels(self) -> list[dict[str, Any]]:
        """Each load level's setting, lowest first; [{}] without loads (jobs.core.plans)."""
        return levels_of(self.loads)

    @property
    def baseline(self) -> RunConfig:
        return self.configs[0]

    @property
    def approaches(self) -> tuple[RunConfig, ...]:
        return self.configs[1:]

    @cached_property
    def points(self) -> Sequence[RunConfig]:
        """The sweep's points' configurations, in grid order: built when asked for, never
        stored (`jobs.core.sweeps`); empty without a sweep."""
        if self.sweep is None:
            return ()
        parent = self.sweep.extends or "baseline"
        return PointConfigs(self.sweep, next(c for c in self.configs if c.approach == parent))

    def config(self, approach: str) -> RunConfig:
        for config in self.configs:
            if config.approach == approach:
                return config
        if isinstance(self.points, PointConfigs) and (found := self.points.find(approach)):
            return found
        raise UserError(f"batch of {self.preset!r} has no approach {approach!r}")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "overrides": self.overrides.to_dict()}


def to_plan(data: dict[str, Any]) -> BatchPlan:
    """The inverse of `BatchPlan.to_dict` (plans travel as JSON through the store and broker)."""
    fields = dict(data)
    fields["configs"] = tuple(RunConfig(**c) for c in fields["configs"])
    fields["warnings"] = tuple(fields.get("warnings", ()))
    fields["evidence"] = tuple(fields.get("evidence", ()))
    fields.pop("points", None)  # stored before points were made on demand: the grid's own
    if fields.get("sweep") is not None:
        fields["sweep"] = to_sweep_plan(fields["sweep"])
    return BatchPlan(**fields)
