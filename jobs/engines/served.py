"""A served engine's run: one server process group per configuration, one benchmark process per
repetition, and always a stop of the whole group (docs/contracts.md's engine contracts).

A run is: a free port, launch, wait for `/health` (or the engine's ready line) while a watcher
reads every log line against the fatal failure rules, one benchmark run per repetition, and a
stop. A fatal line, an early exit, a timeout or a cancel each end the run at once. Lines where
the server falls back from a feature (fallback rules) are kept in the record's `fallbacks`.

Every repetition is a measurement of its own: a seed of its own (the same seed for the same
repetition of every configuration, so they see the same prompts), the engine's caches reset
before it where the engine can. A repetition whose result has fewer `completed` requests than
prompts sent is no sample: the record's `repetitions` says why. With the plan's `warmup`, one
more benchmark run comes first on the same server, with a seed after the repetitions': the first
pass after a start runs cold, so it is recorded (the record's `warmup`) but never a sample.

With load levels the server starts once and is benchmarked at every level, lowest first
(jobs.engines.levels_run: the levels, their record and their checkpoint for a resume).

What differs between engines (command lines, the result file, the accept length, the cache
reset) is the engine's `Dialect`.
"""

from __future__ import annotations

import secrets
import threading
import time
from pathlib import Path

from jobs.core.plans import RunConfig
from jobs.core.records import RunRecord
from jobs.core.rules import RuleSet
from jobs.core.workloads import prompts_of
from jobs.engines.base import RunContext, now_iso, server_env, to_run_record
from jobs.engines.bench_passes import Pass, take_repetition, take_warmup
from jobs.engines.categories_run import runs_of
from jobs.engines.dialect import Dialect
from jobs.engines.levels_run import Ending as _Ending
from jobs.engines.levels_run import Level
from jobs.engines.procs import TAIL_LINES, ProcessGroup, free_port
from jobs.engines.server_metrics import poller_for
from jobs.engines.watch import LogWatch

TICK_S = 0.1  # longest a fatal line, an exit or a bench end waits to be noticed
STOP_CHECK_EVERY_S = 0.5
GRACE_S = 5.0
FATAL_GRACE_S = 1.0  # a server that logged a fatal line can only die: no need to wait long
SELF_EXIT_S = 0.3
BENCH_ERROR_LINES = 30


def run_served(config: RunConfig, ctx: RunContext, *, rules: RuleSet,
               dialect: Dialect) -> RunRecord:
    """One configuration's run; never leaves a process of it behind."""
    return _Run(config=config, ctx=ctx, rules=rules, dialect=dialect).execute()


class _Run:
    """One configuration's run; `execute` never leaves a process of it behind."""

    def __init__(self, *, config: RunConfig, ctx: RunContext, rules: RuleSet,
                 dialect: Dialect) -> None:
        self.config = config
        self.ctx = ctx
        self.dialect = dialect
        self.python = dialect.python
        self.port = free_port()
        # `${NAME}` read here, on the worker, at start; the stack's environment under it
        self.started = server_env(config, dialect.env)
        self.env = self.started.env
        self.watch = LogWatch(rules, self.port, dialect.ready_line)
        self.server: ProcessGroup | None = None
        self.bench: ProcessGroup | None = None
        self.lost_output: OSError | None = None  # a log a full disk kept from being written
        self._stop_checked = 0.0
        self.level = Level(load={})  # the level being measured
        self.measured = 0  # levels measured on this server
        self.notes: list[str] = []  # specbench's own lines, after the server's log tail
        stem = ctx.log_path.name.removesuffix(".log")
        self.bench_log = ctx.log_path.with_name(f"{stem}.bench.log")
        self.bench_stem = ctx.log_path.with_name(f"{stem}.bench")

    def execute(self) -> RunRecord:
        started_at = now_iso()
        levels = runs_of(self.config, self.ctx)  # the load levels, or a workload's categories
        ending: _Ending | None = levels.refusal()
        try:
            if ending is None and levels.pending:  # else every level came from the checkpoint
                self.ctx.on_phase("launching", {})
                ending = self._launch() or self._wait_ready()
                if ending is not None:
                    levels.ended_before(ending.status)
                else:
                    self.ctx.on_phase("ready", {})
                    ending = levels.run(self)
        finally:
            self._shut_down(fatal=self.watch.fatal is not None)
        if self.lost_output is not None:  # a full data dir: jobs.batches.disk_space reruns it
            raise self.lost_output
        ending = ending or _Ending("ok", exit_code=0)
        if ending.status == "failed" and ending.exit_code is None and self.server is not None:
            code = self.server.proc.returncode
            # A server that died by itself after its fatal line has a code of its own; a
            # negative one is our signal, not the server's.
            ending.exit_code = code if code is not None and code >= 0 else None
        tail = list(self.server.tail) if self.server is not None else []
        metrics, extra = levels.record_parts(ending.status, in_bench=ending.in_bench)
        extra["sampling"] = self.dialect.sampling(self.ctx.plan.bench)
        extra["prompts"] = prompts_of(self.ctx.plan.bench, engine=self.ctx.plan.engine,
                                      workload=self.ctx.plan.workload is not None)
        if self.watch.fallbacks:  # early startup lines: the log tail may have lost them
            extra["fallbacks"] = list(self.watch.fallbacks)
        record = to_run_record(
            self.config, self.ctx, status=ending.status, started_at=started_at,
            exit_code=ending.exit_code, log_tail="\n".join(
                [*tail, *levels.notes, *self.notes, *ending.extra_lines][-TAIL_LINES:]),
            metrics=metrics, extra=extra,
        )
        levels.finish()
        return record

    def measure(self, level: Level) -> _Ending | None:
        """One level on the ready server: its warm-up, then its repetitions."""
        self.level = level
        ending: _Ending | None = None
        if self.ctx.plan.warmup:
            self.ctx.on_phase("warmup", level.tag({"of": self.ctx.plan.reps}))
            ending = self._bench_once(0)
        ending = ending or self._repeat()
        self.measured += 1
        return ending

    def _repeat(self) -> _Ending | None:
        """The repetitions, until one ends the run or `stop_early` holds (at one point only: a
        point is judged at every level or category it reaches)."""
        reps, level = self.ctx.plan.reps, self.level
        for rep in range(1, reps + 1):
            self.ctx.on_phase("repetition", level.tag({"rep": rep, "of": reps}))
            ending = self._bench_once(rep)
            if ending is not None:
                return ending
            got = level.samples.get(self.ctx.plan.metric, [])
            if rep < reps and self.ctx.stop_early and not self.ctx.plan.is_multipoint \
                    and self.ctx.stop_early(got):
                level.stopped_early = rep
                self.notes.append(f"specbench: stopped after repetition {rep} of "
                                  f"{reps}: this point can no longer beat the best")
                return None
        return None

    def _launch(self) -> _Ending | None:
        if not self.started.is_complete:  # a reference the worker lacks: bad-config
            self.ctx.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.ctx.log_path.open("a", encoding="utf-8") as handle:
                handle.writelines(line + "\n" for line in self.started.unset)
            return _Ending("failed", extra_lines=list(self.started.unset))
        # the secret args' references resolved: only the server's command line holds them
        argv = self.dialect.server_argv(self.port, self.started.config)
        try:
            self.server = ProcessGroup(
                argv, env=self.env, log_path=self.ctx.log_path, on_line=self.watch.on_line,
                secrets=self.started.secrets,
            )
        except OSError as exc:
            return _Ending("failed", extra_lines=[f"specbench: cannot start {self.python}: {exc}"])
        threading.Thread(target=self.watch.poll_health, name="health", daemon=True).start()
        return None

    def _wait_ready(self) -> _Ending | None:
        deadline = time.monotonic() + self.ctx.plan.startup_s
        while True:
            ending = self._server_ending() or self._cancel_ending()
            if ending is not None:
                return ending
            if self.watch.ready:
                return None
            if time.monotonic() >= deadline:
                return _Ending("timeout")
            self.watch.event.wait(TICK_S)
            self.watch.event.clear()

    def _bench_once(self, rep: int) -> _Ending | None:
        """One benchmark run at the level: repetition `rep`, or the warm-up for 0."""
        plan, dialect, level = self.ctx.plan, self.dialect, self.level
        label = f"rep{rep}" if rep else "warmup"
        if level.label():
            label = f"{level.label()}.{label}"
        out_file = Path(f"{self.bench_stem}.{label}.{secrets.token_hex(3)}.json")
        bench = dialect.bench_settings(level.bench, rep=rep or plan.reps + 1)
        if rep > 1 or (rep == 1 and (plan.warmup or self.measured)):
            self._reset(rep)
        argv = dialect.bench_argv(self.port, out_file, bench)
        before = dialect.counters(self.port, self.watch.opener)
        try:
            self.bench = ProcessGroup(argv, env=self.env, log_path=self.bench_log,
                                      secrets=self.started.secrets)
        except OSError as exc:
            return _Ending("failed", in_bench=True, extra_lines=[
                f"specbench: cannot start {dialect.bench_name}: {exc}"])
        deadline = time.monotonic() + self.ctx.plan.bench_s
        ending: _Ending | None = None
        poller = poller_for(plan.engine, port=self.port, opener=self.watch.opener,
                            server_args=self.config.server_args) if rep else None
        try:
            if poller is not None:  # the engine's /metrics while the repetition runs
                poller.start()
            while ending is None and self.bench.poll() is None:
                ending = self._server_ending() or self._cancel_ending()
                if ending is None and time.monotonic() >= deadline:
                    ending = _Ending("timeout", in_bench=True)
                if ending is None:
                    self.watch.event.wait(TICK_S)
                    self.watch.event.clear()
        finally:
            self.bench.stop(grace_s=2.0)
            self.lost_output = self.lost_output or self.bench.no_space_error()
            if poller is not None:
                level.server_metrics.append({"rep": rep, **poller.stop()})
        if ending is not None:
            if ending.status == "timeout":
                ending.extra_lines = self._bench_lines(rep, "timed out")
            return ending
        code = self.bench.proc.returncode
        result = dialect.read_result(out_file)
        if code != 0 or result is None:
            why = f"exited {code}" if code != 0 else f"exited 0 but wrote no result to {out_file}"
            ending = self._server_ending() or _Ending("failed", exit_code=code, in_bench=True)
            ending.extra_lines = self._bench_lines(rep, why)  # the server's, if it died under it
            return ending
        sent = dialect.prompts_sent(level.bench)
        length = dialect.accept_length(result, before, dialect.counters(self.port,
                                                                        self.watch.opener))
        pass_ = Pass(result=result, rep=rep, seed=bench["seed"], sent=sent, length=length)
        taken = take_warmup if rep == 0 else take_repetition
        taken(pass_, level, plan=plan, dialect=dialect, notes=self.notes,
              on_phase=self.ctx.on_phase)
        return None

    def _reset(self, rep: int) -> None:
        """The engine's caches emptied before repetition `rep`, where it can."""
        why = self.dialect.before_repetition(self.port, self.watch.opener)
        if why is not None:
            self.notes.append(f"specbench: the cache reset before repetition {rep} failed: {why}")

    def _bench_lines(self, rep: int, why: str) -> list[str]:
        assert self.bench is not None
        what = f"repetition {rep}" if rep else "warm-up"
        return [f"specbench: {self.dialect.bench_name} ({what}) {why}:",
                *self.bench.last_lines(BENCH_ERROR_LINES)]

    def _server_ending(self) -> _Ending | None:
        """Failed at once on a fatal log line or when the server exits by itself."""
        assert self.server is not None
        if self.watch.fatal is not None:
            return _Ending("failed", exit_code=self.server.poll())
        code = self.server.poll()
        if code is None:
            return None
        self.server.wait_output(2.0)  # its last lines may name the cause
        return _Ending("failed", exit_code=code)

    def _cancel_ending(self) -> _Ending | None:
        if (now := time.monotonic()) - self._stop_checked < STOP_CHECK_EVERY_S:
            return None
        self._stop_checked = now
        return _Ending("cancelled") if self.ctx.should_stop() else None

    def _shut_down(self, *, fatal: bool) -> None:
        self.watch.close()
        try:
            if self.server is not None:
                self.ctx.on_phase("stopping", {})
        finally:
            if self.bench is not None and self.bench.poll() is None:
                self.bench.stop(grace_s=2.0)
            if self.server is not None:
                if fatal:  # often dying already: let it exit by itself and keep its exit code
                    until = time.monotonic() + SELF_EXIT_S
                    while self.server.poll() is None and time.monotonic() < until:
                        time.sleep(0.02)
                self.server.stop(grace_s=FATAL_GRACE_S if fatal else GRACE_S, port=self.port)
                self.lost_output = self.lost_output or self.server.no_space_error()
