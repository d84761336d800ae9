"""The local engine: a tiny seeded Llama on the CPU, run like a server in its own process tree.

Each configuration runs `python -m jobs.engines.local.child --KNOB VALUE ...` through
`ProcessGroup`, so a crash, a hang and a cancel end exactly as they do for a served engine.
The child is forked from a warm server that has imported torch and transformers when it can
(`jobs.engines.local.launcher`): milliseconds instead of seconds per configuration.
The child reports its phases and numbers as `SPECBENCH-EVENT {json}` lines; this adapter turns
them into phases, deadlines and a run record. No GPU, no download.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import queue
import sys
import time
import weakref
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from jobs.core.memory import bench_failure, bench_settings
from jobs.core.plans import BatchPlan, RunConfig
from jobs.core.records import RunRecord
from jobs.engines.base import RunContext, now_iso, server_env, to_run_record
from jobs.engines.levels_run import Levels
from jobs.engines.local import child as local_child
from jobs.engines.local import launcher
from jobs.engines.local.child_args import to_argv, unknown_knobs_reason
from jobs.engines.local.levels import (
    LOAD_KNOB,
    SEARCH_LEVELS,
    LevelProgress,
    Progress,
    by_load,
    capacity_argv,
    capacity_record,
    finished,
    handle_event,
    level_metrics,
    loads_reason,
)
from jobs.engines.procs import LineCallback, ProcessGroup
from jobs.redaction import redact

# Knobs that decide the model and the prompts: with all of them equal to the baseline's, greedy
# output must equal the baseline's too.
OUTPUT_KNOBS = ("hidden-size", "intermediate-size", "num-layers", "num-heads", "vocab-size", "seed")
# Its child decodes greedily (model.py _set_greedy: do_sample off): temperature 0, the same
# sampling a served engine's record names with {"temperature": 0.0}.
SAMPLING = {"temperature": 0.0}
_POLL_S = 0.1
_STOP_GRACE_S = 2.0
_REPO_ROOT = Path(__file__).resolve().parents[3]


class LocalEngine:
    """Runs configurations of `engine: local` presets on this machine's CPU."""

    name = "local"

    def __init__(self, *, fork: bool | None = None) -> None:
        self.launcher = launcher.Launcher(fork=launcher.is_enabled() if fork is None else fork)
        # The fork server ends with its engine: at `close`, when the engine is collected, or
        # at exit (it also ends on its own when this process dies).
        self._finalizer = weakref.finalize(self, self.launcher.close)

    def close(self) -> None:
        """Stop the warm fork server; a later run starts another."""
        self._finalizer()

    def preflight(self, plan: BatchPlan) -> dict[str, str]:
        server = local_child.knob_flags("server")
        bench_reason = unknown_knobs_reason(plan.bench, local_child.knob_flags("bench"))
        bench_reason = loads_reason(plan.loads, plan.capacity) or bench_reason
        out: dict[str, str] = {}
        for config in plan.configs:
            reason = unknown_knobs_reason(config.server_args, server) or bench_reason
            if reason is not None:
                out[config.approach] = reason
        return out

    def fingerprint(self) -> dict[str, Any]:
        cpu = _cpu_model()
        return {
            "gpu": f"none (CPU: {cpu})", "gpu_count": 0, "compute_capability": None,
            "interconnect": None, "driver": None, "cuda": None, "torch": _version("torch"),
            "nccl": None,
            "cpu": cpu, "cpu_cores": os.cpu_count(), "transformers": _version("transformers"),
        }

    def run(self, config: RunConfig, ctx: RunContext) -> RunRecord:
        started_at = now_iso()
        # With loads or a capacity search, the levels a checkpoint holds (a worker died after
        # them) are not run again.
        searching = ctx.plan.capacity is not None
        state = Levels(config, ctx) if ctx.plan.loads or searching else None
        progress = Progress(
            total=SEARCH_LEVELS if searching else len(ctx.plan.levels), restored=[
                level.restored for level in (state.levels if state else []) if level.restored])
        if state is not None:
            progress.on_level_done = functools.partial(_checkpoint, state=state, plan=ctx.plan)
        started = server_env(config, PYTHONUNBUFFERED="1")  # `${NAME}` read here, at start
        argv = [sys.executable, "-m", "jobs.engines.local.child",
                *self.to_child_argv(started.config, ctx, done=len(progress.restored),
                                    restored=progress.restored)]
        env = started.env
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO_ROOT), env.get("PYTHONPATH")]))
        secrets = started.secrets  # the log file is masked at the source, as the record is
        header = redact("specbench: " + " ".join(argv[1:]), secrets=secrets)
        _append_log(ctx.log_path, header)
        for note in state.notes if state else []:
            _append_log(ctx.log_path, note)
        if not started.is_complete:  # a reference the worker lacks: bad-config, no child
            for line in started.unset:
                _append_log(ctx.log_path, line)
            levels = {"capacity": capacity_record(ctx.plan, progress, status="failed")} \
                if searching else \
                {"by_load": by_load(ctx.plan, progress, status="failed")} if state else {}
            return to_run_record(config, ctx, status="failed", started_at=started_at,
                                 log_tail="\n".join([header, *started.unset]),
                                 extra={**levels, "sampling": dict(SAMPLING)})
        events: queue.Queue[dict[str, Any]] = queue.Queue()
        ctx.on_phase("launching", {})
        group = self.launcher.start(argv, env=env, log_path=ctx.log_path,
                                    on_line=_reader(events), secrets=secrets,
                                    should_stop=ctx.should_stop, wait_s=ctx.plan.startup_s)
        try:
            outcome, note = self._watch(group, events, progress, ctx)
        finally:
            ctx.on_phase("stopping", {})
            group.stop(grace_s=_STOP_GRACE_S)
        _drain(events, progress, ctx)
        exit_code = group.proc.returncode
        if outcome is None:
            reached = len(progress.restored) + len(progress.levels)
            complete = progress.done is not None and (
                searching or reached == len(ctx.plan.levels)) and all(
                len(level.figures.get("output_throughput", [])) == ctx.plan.reps
                for level in progress.levels)
            outcome = "ok" if exit_code == 0 and complete else "failed"
        tail = [header]
        tail += [line for line in group.tail if not line.startswith(local_child.EVENT_PREFIX)]
        if note:
            note = redact(note, secrets=secrets)
            _append_log(ctx.log_path, note)
            tail.append(note)
        done = progress.done or {}
        first = progress.levels[0] if progress.levels else LevelProgress(load={})
        extra: dict[str, Any] = {
            "warmup": first.warmup, "sampling": dict(SAMPLING),
            **{k: done[k] for k in ("output_digest", "prompt_digests") if k in done}}
        metrics = level_metrics(ctx.plan, first, done.get("accept_length"))
        if progress.bench_refused and outcome == "failed":  # no dead end of the server's
            extra.update(bench_failure(bench_settings(ctx.plan)))
        if state is not None:
            tail[1:1] = state.notes
            if searching:  # docs/contracts.md "Capacity under the SLO": in the order they ran
                extra["capacity"] = capacity_record(ctx.plan, progress, status=outcome)
                entries: list[dict[str, Any]] = extra["capacity"]["levels"]
            else:
                extra["by_load"] = entries = by_load(ctx.plan, progress, status=outcome)
            lowest: dict[str, Any] = entries[0] if entries else {"metrics": metrics, "warmup": None}
            # the record's own figures are the lowest (or the search's first) level's
            metrics, extra["warmup"] = dict(lowest["metrics"]), lowest["warmup"]
        record = to_run_record(
            config, ctx, status=outcome, started_at=started_at, exit_code=exit_code,
            log_tail="\n".join(tail[-200:]), metrics=metrics, extra=extra,
        )
        if state is not None:
            state.finish()  # the record is made: its checkpoint is no longer needed
        return record

    def to_child_argv(self, config: RunConfig, ctx: RunContext, *, done: int = 0,
                      restored: Sequence[Mapping[str, Any]] = ()) -> list[str]:
        """The child's flags: the server args, the bench, the repetitions, the levels (but the
        `done` first ones; a capacity search's `restored` levels), the baseline's digest."""
        argv = [*to_argv(config.server_args), *to_argv(ctx.plan.bench)]
        argv += ["--reps", str(ctx.plan.reps), *(["--warmup"] if ctx.plan.warmup else [])]
        if ctx.plan.loads:  # every level in this one child: the server starts once
            argv += ["--loads", json.dumps(ctx.plan.loads[LOAD_KNOB][done:])]
        argv += capacity_argv(ctx.plan, restored)  # the search, level by level, in this child
        base = ctx.baseline
        if base is None or base.status != "ok" or config.role == "baseline":
            return argv
        if any(base.server_args.get(k) != config.server_args.get(k) for k in OUTPUT_KNOBS):
            return argv  # another model or prompts: its output may differ
        if isinstance(digest := base.extra.get("output_digest"), str):
            argv += ["--baseline-digest", digest]
            prompts = base.extra.get("prompt_digests")
            if isinstance(prompts, list):
                argv += ["--baseline-prompt-digests", ",".join(map(str, prompts))]
        return argv

    def _watch(
        self,
        group: ProcessGroup,
        events: queue.Queue[dict[str, Any]],
        progress: Progress,
        ctx: RunContext,
    ) -> tuple[str | None, str]:
        """Follow the child until it exits, is cancelled or misses a deadline."""
        plan = ctx.plan
        deadline, waiting_for = time.monotonic() + plan.startup_s, "startup_s"
        while True:
            try:
                event = events.get(timeout=_POLL_S)
            except queue.Empty:
                event = None
            if event is not None:
                handle_event(event, progress, ctx)
                if event["event"] in ("ready", "level", "warmup", "repetition"):
                    deadline, waiting_for = time.monotonic() + plan.bench_s, "bench_s"
                continue
            if ctx.should_stop():
                return "cancelled", "specbench: cancelled; the process group was stopped"
            if group.poll() is not None:
                group.wait_output()
                return None, ""
            if time.monotonic() > deadline:
                limit = plan.startup_s if waiting_for == "startup_s" else plan.bench_s
                what = "the model to be ready" if waiting_for == "startup_s" else "a bench pass"
                return "timeout", (
                    f"specbench: timed out after {limit:g} s ({waiting_for}) waiting for {what}"
                )


def _checkpoint(progress: Progress, *, state: Levels, plan: BatchPlan) -> None:
    """A level is done: keep the levels done so far, but not the last (its record follows); a
    capacity search does not know its last, and keeps every one."""
    levels = finished(plan, progress)
    if plan.capacity is not None or len(levels) < len(plan.levels):
        state.save(levels)


def _reader(events: queue.Queue[dict[str, Any]]) -> LineCallback:
    def on_line(line: str) -> None:
        if line.startswith(local_child.EVENT_PREFIX):
            try:
                event = json.loads(line[len(local_child.EVENT_PREFIX) :])
            except json.JSONDecodeError:
                return
            if isinstance(event, dict) and isinstance(event.get("event"), str):
                events.put(event)

    return on_line


def _drain(events: queue.Queue[dict[str, Any]], progress: Progress, ctx: RunContext) -> None:
    while True:
        try:
            handle_event(events.get_nowait(), progress, ctx)
        except queue.Empty:
            return


def _append_log(path: Path, line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None
