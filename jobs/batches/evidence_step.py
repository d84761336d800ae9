"""A batch's evidence, gathered by the worker before its servers (docs/contracts.md "Evidence for
the why"): with `evidence: [collectives]`, one collectives probe per distinct (world, collective
env) among the batch's configurations, at the message sizes their verify steps send; each record
then carries its `evidence` (`jobs.evidence.plan_evidence`).

A sweep's points are probed with the configurations while they are few (`ahead`: each size
costs milliseconds, each probe a start of torch in every rank); in a larger sweep a point is
looked at when it is about to run, and a group or size nothing before it needed is probed then.
A probe that fails or hangs (stopped at its own timeout) is a reason in the records of its group,
never a failed batch; every probe's seconds are kept for `make bench`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jobs.core.configs import RunConfig
from jobs.core.engine_info import describe
from jobs.core.plans import BatchPlan
from jobs.evidence.plan_evidence import Group, Need, groups, need_of, record_evidence

PROBE_TIMEOUT_S = 120.0
AHEAD_POINTS = 512  # a sweep of at most this many points has all its points probed up front
# (world, env, sizes, timeout) -> docs/contracts.md's probe JSON; raises with a one-line reason
Prober = Callable[[int, Mapping[str, str], Sequence[int], float], dict[str, Any]]
Phase = Callable[[str, dict[str, Any]], None]


def ahead(plan: BatchPlan, configs: Sequence[RunConfig]) -> list[RunConfig]:
    """What to probe before the servers: `configs`, and a sweep's points while they are few."""
    return [*configs, *(plan.points if len(plan.points) <= AHEAD_POINTS else ())]


class Evidence:
    """The evidence of one batch's configurations, probed once per group."""

    def __init__(self, plan: BatchPlan, *, probe: Prober, on_phase: Phase | None = None,
                 timeout_s: float = PROBE_TIMEOUT_S) -> None:
        self.wanted = "collectives" in plan.evidence
        self._info = describe(plan.engine) if self.wanted else None
        self._probe = probe
        self._on_phase = on_phase or (lambda _phase, _details: None)
        self._timeout_s = timeout_s
        self._results: dict[Group, dict[str, Any]] = {}
        self._failed: dict[Group, str] = {}
        self._sizes: dict[Group, set[int]] = {}
        self.seconds: list[float] = []  # each probe's wall time

    def prepare(self, configs: Sequence[RunConfig]) -> None:
        """Probe every group the configurations need, before any server starts."""
        if not self.wanted:
            return
        self._ensure([self._need(c) for c in configs])

    def of(self, config: RunConfig) -> dict[str, Any] | None:
        """The record's `evidence` for `config` (None without `evidence: [collectives]`)."""
        if not self.wanted:
            return None
        need = self._need(config)
        self._ensure([need])
        return record_evidence(need, self._results.get(need.group),
                               failed=self._failed.get(need.group))

    def _need(self, config: RunConfig) -> Need:
        assert self._info is not None
        return need_of(config, self._info)

    def _ensure(self, needs: Sequence[Need]) -> None:
        for group, sizes in groups(needs).items():
            have = self._sizes.setdefault(group, set())
            todo = sorted(set(sizes) - have)
            if not todo or group in self._failed:
                continue
            world, env = group
            self._on_phase("probe", {"world": world, "env": dict(env), "sizes": todo})
            begun = time.monotonic()
            try:
                got = self._probe(world, dict(env), todo, self._timeout_s)
            except Exception as exc:  # evidence never fails a batch: the reason is kept
                self._failed[group] = f"the collectives probe failed: {exc}"
                continue
            finally:
                self.seconds.append(time.monotonic() - begun)
            have.update(todo)
            known = self._results.get(group)
            if known is not None:
                got = {**got, "sizes": [*known.get("sizes", []), *got.get("sizes", [])]}
            self._results[group] = got
