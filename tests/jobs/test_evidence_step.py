"""The batch's evidence step: one probe per group before the servers, a failing probe a reason
(issue 24, items 2 and 6). The probe itself is measured for real in tests/jobs/test_probe.py."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from jobs.batches.evidence_step import AHEAD_POINTS, Evidence, ahead
from jobs.core.plans import load_preset, resolve


class Probes:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[int, dict[str, str], list[int]]] = []
        self.fail = fail

    def __call__(self, world: int, env: Mapping[str, str], sizes: Sequence[int],
                 timeout_s: float) -> dict[str, Any]:
        self.calls.append((world, dict(env), list(sizes)))
        if self.fail:
            raise TimeoutError(f"stopped after {timeout_s:g} s: rank 1 never joined")
        return {"backend": "gloo", "world": world, "env": dict(env),
                "sizes": [{"bytes": s, "latency_us": 10.0 + s / 1000, "algbw_gbps": 1.0,
                           "busbw_gbps": 1.0} for s in sizes]}


def demo_plan(**changes: Any) -> Any:
    plan = resolve(load_preset("cpu-demo"), reps=1)
    return dataclasses.replace(plan, evidence=("collectives",), **changes)


def test_one_probe_per_group_before_the_servers_and_points_probed_when_they_run() -> None:
    probes = Probes()
    plan = demo_plan()
    evidence = Evidence(plan, probe=probes)
    evidence.prepare(plan.configs)
    assert len(probes.calls) == 1  # every demo configuration: 2 CPU ranks, no collective env
    world, env, sizes = probes.calls[0]
    assert (world, env, sizes) == (2, {}, [256, 5 * 256, 11 * 256])
    base = evidence.of(plan.configs[0])
    assert base is not None and base["allreduce"]["bytes"] == 256
    assert base["allreduces"] == 8 and base["allreduce"]["latency_us"] > 10.0
    point = plan.points[0]  # a sweep point drafting another number of tokens
    got = evidence.of(point)
    assert got is not None and got["allreduce"] is not None
    assert probes.calls[1] == (2, {}, [3 * 64 * 4])  # its size, probed when it is about to run
    evidence.of(point)
    assert len(probes.calls) == 2  # once


def test_a_small_sweep_is_probed_in_one_probe_before_the_servers() -> None:
    probes = Probes()
    plan = demo_plan()
    assert 0 < len(plan.points) <= AHEAD_POINTS
    evidence = Evidence(plan, probe=probes)
    evidence.prepare(ahead(plan, plan.configs))
    assert len(probes.calls) == 1 and 3 * 64 * 4 in probes.calls[0][2]
    for point in plan.points:
        assert evidence.of(point) is not None
    assert len(probes.calls) == 1  # no point needed a probe of its own
    big = dataclasses.replace(plan.sweep, grid={**plan.sweep.grid, "seed": list(range(600))})
    assert ahead(dataclasses.replace(plan, sweep=big), plan.configs) == list(plan.configs)


def test_a_failing_probe_is_a_reason_in_the_records_not_a_failure() -> None:
    plan = demo_plan()
    evidence = Evidence(plan, probe=Probes(fail=True), timeout_s=3)
    evidence.prepare(plan.configs)
    got = evidence.of(plan.configs[1])
    assert got is not None and got["allreduce"] is None
    assert got["missing"] == ("the collectives probe failed: stopped after 3 s: rank 1 never "
                              "joined")


def test_nothing_without_evidence_in_the_preset() -> None:
    probes = Probes()
    plan = dataclasses.replace(resolve(load_preset("cpu-demo"), reps=1), evidence=())
    evidence = Evidence(plan, probe=probes)
    evidence.prepare(plan.configs)
    assert evidence.of(plan.configs[0]) is None and probes.calls == []
