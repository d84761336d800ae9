"""A served configuration's load levels (docs/contracts.md "Load levels and service-level
objectives"): one server, every level of the plan in turn, lowest first, and a checkpoint of the
levels done.

The server starts once; at each level the benchmark runs with the level's knob set
(`jobs.core.plans.bench_at`): a "level" phase, the warm-up (with the plan's `warmup`), then the
repetitions, each phase tagged with the level's `load`. A level is a `Level`: its samples, its
warm-up, its repetitions. The record's top-level metrics, warm-up and repetitions are the lowest
level's; with loads it adds `by_load`, every level in order: those the run never reached are
`skipped` (after a failure or a timeout) or `cancelled`, with empty metrics. A batch without
loads is one level and its record has no `by_load`, as before levels existed. `stop_early` (a
sweep's point that can no longer win) only ends the repetitions of a batch without loads: with
loads, a point is judged at every level, so each level runs all of them.

Resume at the level reached: after each finished level the levels done so far are written
atomically to a checkpoint beside the configuration's log (`<approach>.levels.json`: a temporary
file renamed over it). A worker killed mid-configuration leaves it behind; the batch's resume
runs the configuration again (it has no record), the server starts again, and the levels the
checkpoint holds are taken from it instead of being benchmarked again; the first level left
starts with its own warm-up, as every level does. The checkpoint holds a key: a hash of what the
measurements depend on (the configuration's server args and env, the plan's engine, bench,
reps, warm-up, loads, metric and SLO keys), so a changed preset or configuration never reuses
it; a checkpoint that cannot be read, or whose key differs, is ignored. It is deleted once the
record is made, whatever its status. Only batches with loads write one. When every level is in
the checkpoint the server is not started at all.

Capacity under the SLO (docs/contracts.md "Capacity under the SLO"): the levels are not known in
advance. Before each level the search (jobs.core.capacity) proposes the next load from the levels
measured so far, until it is done; the record keeps them as its `capacity` (in the order they
ran), its top-level figures the first level's (`from`). The checkpoint holds the levels measured
in that order, and a resumed run takes each back as long as it is the load the search proposes
after the ones before it, so no level is measured twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from jobs.core.capacity import MAX_LEVELS, Spec, next_load, searched, section
from jobs.core.memory import bench_failure, bench_settings
from jobs.core.plans import Load, RunConfig, bench_at, load_label
from jobs.engines.base import RunContext
from jobs.engines.server_metrics import summarize

CHECKPOINT_VERSION = 1


@dataclass
class Ending:
    """Why a run stopped early; None of these means it went well."""

    status: str
    exit_code: int | None = None
    extra_lines: list[str] = field(default_factory=list)
    in_bench: bool = False  # the benchmark failed, on a server that was up


@dataclass
class Level:
    """One load level of a run: what its benchmark runs measured."""

    load: Load
    index: int = 0
    bench: dict[str, Any] = field(default_factory=dict)  # the preset's bench at this level
    status: str = "ok"
    samples: dict[str, list[float]] = field(default_factory=dict)
    accept: list[float] = field(default_factory=list)
    repetitions: list[dict[str, Any]] = field(default_factory=list)
    warmup: dict[str, Any] | None = None
    stopped_early: int | None = None
    restored: dict[str, Any] | None = None  # the entry the checkpoint held
    server_metrics: list[dict[str, Any]] = field(default_factory=list)  # each repetition's

    def tag(self, details: dict[str, Any]) -> dict[str, Any]:
        """A phase's details with this level's load (none without loads)."""
        return {**details, "load": dict(self.load)} if self.load else details

    def label(self) -> str:
        """What its benchmark's files are named after ('' without loads): `max-concurrency4`."""
        return "-".join(f"{k}{v}" for k, v in self.load.items())

    def metrics(self) -> dict[str, Any]:
        measured: dict[str, Any] = dict(self.samples)
        measured["accept_length"] = sum(self.accept) / len(self.accept) if self.accept else None
        return measured

    def entry(self) -> dict[str, Any]:
        """This level as `by_load` keeps it."""
        if self.restored is not None:
            return dict(self.restored)
        found: dict[str, Any] = {"load": dict(self.load), "metrics": self.metrics(),
                                 "status": self.status, "warmup": self.warmup,
                                 "repetitions": list(self.repetitions)}
        if self.stopped_early is not None:
            found["stopped_early"] = self.stopped_early
        if (read := summarize(self.server_metrics)) is not None:
            found["server_metrics"] = read
        return found


class Measures(Protocol):
    """The run that measures a level on its (ready) server."""

    def measure(self, level: Level) -> Ending | None: ...


def checkpoint_key(config: RunConfig, ctx: RunContext) -> str:
    """What a level's measurement depends on, hashed: a checkpoint with another key is stale."""
    plan = ctx.plan
    facts = {"version": CHECKPOINT_VERSION, "approach": config.approach,
             "server_args": config.server_args, "env": config.env, "engine": plan.engine,
             "bench": plan.bench, "reps": plan.reps, "warmup": plan.warmup,
             "loads": plan.loads, "metric": plan.metric, "slo": sorted(plan.slo)}
    if plan.capacity is not None:  # the search's levels depend on its range and the limits
        facts["capacity"] = {**plan.capacity, "limits": plan.slo}
    text = json.dumps(facts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def checkpoint_path(log_path: Path) -> Path:
    return log_path.with_name(f"{log_path.name.removesuffix('.log')}.levels.json")


class Levels:
    """Every level of one configuration's run, the checkpoint's among them."""

    def __init__(self, config: RunConfig, ctx: RunContext) -> None:
        self.ctx = ctx
        plan = ctx.plan
        self.capacity = Spec.of(plan.capacity) if plan.capacity is not None else None
        self.with_loads = plan.loads is not None or self.capacity is not None
        self.levels = [] if self.capacity is not None else [
            Level(load=load, index=i, bench=bench_at(plan.bench, load))
            for i, load in enumerate(plan.levels)]
        self.path = checkpoint_path(ctx.log_path)
        self.key = checkpoint_key(config, ctx)
        self.notes: list[str] = []
        if self.with_loads:
            self._restore()

    def refusal(self) -> Ending | None:  # levels always can start (a workload may not)
        return None

    @property
    def pending(self) -> list[Level]:
        if self.capacity is not None:  # the level the search proposes next, if any
            load = self._proposed()
            return [] if load is None else [self._level_at(load)]
        return [level for level in self.levels if level.restored is None]

    def _proposed(self) -> float | None:
        assert self.capacity is not None
        done = searched(self.capacity, [level.entry() for level in self.levels], self.ctx.plan.slo)
        if len(done) < len(self.levels):  # a level that did not run to its end ends the search
            return None
        return next_load(self.capacity, done)

    def _level_at(self, load: float) -> Level:
        assert self.capacity is not None
        setting = self.capacity.load(load)
        return Level(load=setting, index=len(self.levels),
                     bench=bench_at(self.ctx.plan.bench, setting))

    def run(self, runner: Measures) -> Ending | None:
        """Each level not done yet, lowest first, until one ends the run."""
        if self.capacity is not None:
            return self._search(runner)
        total = len(self.levels)
        for level in self.pending:
            if self.with_loads:
                self.ctx.on_phase("level", {"load": dict(level.load), "level": level.index + 1,
                                            "levels": total})
            ending = runner.measure(level)
            if ending is not None:
                level.status = ending.status
                return ending
            if self.with_loads and level.index < total - 1:
                self._save()
        return None

    def _search(self, runner: Measures) -> Ending | None:
        """Capacity under the SLO: the level the search proposes, measured, until it is done."""
        while (load := self._proposed()) is not None:
            level = self._level_at(load)
            self.levels.append(level)
            self.ctx.on_phase("level", {"load": dict(level.load), "level": level.index + 1,
                                        "levels": MAX_LEVELS, "search": "capacity"})
            ending = runner.measure(level)
            if ending is not None:
                level.status = ending.status
                return ending
            self._save()
        return None

    def record_parts(self, status: str, *, in_bench: bool = False,
                     ) -> tuple[dict[str, Any], dict[str, Any]]:
        """(metrics, extra) of the record: the lowest level's, and `by_load` with loads; with
        `in_bench` (the benchmark failed on a live server) where it failed, with what settings:
        no dead end of the server configuration (jobs.core.memory). With a capacity search, the
        first level's (`from`), and the record's `capacity`."""
        after = "cancelled" if status == "cancelled" else "skipped"
        entries: list[dict[str, Any]] = []
        ended = False
        for level in self.levels:
            if ended:
                entries.append({"load": dict(level.load), "metrics": {}, "status": after,
                                "warmup": None, "repetitions": []})
                continue
            entries.append(level.entry())
            ended = level.restored is None and level.status != "ok"
        lowest = entries[0] if entries else {"metrics": {}, "warmup": None}
        metrics = dict(lowest.get("metrics") or {})
        extra: dict[str, Any] = {}
        if lowest.get("repetitions"):
            extra["repetitions"] = lowest["repetitions"]
        extra["warmup"] = lowest.get("warmup")
        if lowest.get("stopped_early") is not None:
            extra["stopped_early"] = lowest["stopped_early"]
        # docs/contracts.md "Evidence for the why": the engine's own
        if lowest.get("server_metrics") is not None:
            extra["server_metrics"] = lowest["server_metrics"]
        if self.capacity is not None:
            extra["capacity"] = section(self.capacity, entries, self.ctx.plan.slo)
        elif self.with_loads:
            extra["by_load"] = entries
        if in_bench:
            extra.update(bench_failure(bench_settings(self.ctx.plan)))
        return metrics, extra

    def ended_before(self, status: str) -> None:
        """The server never came up: the run ended at the first level left."""
        if (left := self.pending):
            left[0].status = status
            if self.capacity is not None:  # the level the search was about to measure
                self.levels.append(left[0])

    def finish(self) -> None:
        """The record is made: its checkpoint is no longer needed."""
        with contextlib.suppress(OSError):
            self.path.unlink()

    def _restore(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if not isinstance(data, dict) or data.get("key") != self.key:
            self.notes.append(f"specbench: {self.path.name} is of another plan or "
                              "configuration: every level runs")
            return
        done = data.get("levels")
        if not isinstance(done, list):
            return
        if self.capacity is not None:
            self._restore_search(done)
            return
        for level, entry in zip(self.levels, done, strict=False):
            if not isinstance(entry, dict) or entry.get("load") != level.load \
                    or entry.get("status") != "ok":
                break
            level.restored = entry
            self.notes.append(f"specbench: {load_label(level.load)} was measured before a "
                              f"restart (its checkpoint): not benchmarked again")

    def _restore_search(self, done: list[Any]) -> None:
        """The checkpoint's levels, in the order they ran, each while it is the load the search
        proposes after those before it."""
        for entry in done:
            load = self._proposed()
            if load is None or not isinstance(entry, dict) or entry.get("status") != "ok":
                break
            level = self._level_at(load)
            if entry.get("load") != level.load:
                break
            level.restored = entry
            self.levels.append(level)
            self.notes.append(f"specbench: {load_label(level.load)} was measured before a "
                              f"restart (its checkpoint): not benchmarked again")

    def _save(self) -> None:
        done = [level.entry() for level in self.levels
                if level.restored is not None or (level.status == "ok" and level.repetitions)]
        self.save(done)

    def save(self, done: list[dict[str, Any]]) -> None:
        """The levels done (`by_load` entries, lowest first) as this run's checkpoint, written
        atomically: a worker that dies mid-write leaves the previous one."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with temporary.open("w", encoding="utf-8") as handle:
            json.dump({"key": self.key, "levels": done}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)
