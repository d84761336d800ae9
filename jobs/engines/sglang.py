"""The SGLang engine: one `launch_server` process group per configuration (SPEC.md's contract).

A run is: the configuration spelled for the installed release (flag_table), a free port, launch,
wait for `/health` (or the ready line) while a watcher reads every log line against the fatal
failure rules, one `bench_serving` per repetition, and always a stop of the whole group. A fatal
line, an early exit, a timeout or a cancel each end the run at once. Lines where the server
falls back from a feature (fallback rules) are kept in the record's `fallbacks`.

Every repetition is a measurement of its own: a seed of its own (the same seed for the same
repetition of every configuration, so they see the same prompts), the prefix cache flushed
before it (/flush_cache) and after bench_serving's warm-up (`--flush-cache`; a flush also resets
SGLang's accept-length counters, so the figure bench_serving reads is this repetition's own). A
repetition whose result has fewer `completed` requests than prompts sent is no sample: the
record's `repetitions` says why.

With the plan's `warmup`, one more bench_serving run comes first on the same server, with the
same settings, a seed after the repetitions' and its own output file: the first pass after a
start runs cold, so it is recorded (the record's `warmup`) but never a sample.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from jobs.core.errors import EngineError, UserError
from jobs.core.plans import BatchPlan, RunConfig
from jobs.core.records import RunRecord
from jobs.core.rules import Match, RuleSet, load_rules
from jobs.engines import preflight
from jobs.engines.base import RunContext, now_iso, server_env, to_run_record
from jobs.engines.fingerprint import host_fingerprint
from jobs.engines.flag_table import load_table, to_release
from jobs.engines.procs import TAIL_LINES, ProcessGroup, free_port
from jobs.settings import sglang_python

log = logging.getLogger(__name__)

READY_LINE = "The server is fired up and ready to roll!"
BENCH_METRICS = ("output_throughput", "total_throughput", "median_ttft_ms", "median_itl_ms")
TICK_S = 0.1  # longest a fatal line, an exit or a bench end waits to be noticed
HEALTH_EVERY_S = 0.2
STOP_CHECK_EVERY_S = 0.5
GRACE_S = 5.0
FATAL_GRACE_S = 1.0  # a server that logged a fatal line can only die: no need to wait long
SELF_EXIT_S = 0.3
BENCH_ERROR_LINES = 30
BENCH_DEFAULT_PROMPTS = 1000  # bench_serving's --num-prompts default in 0.5.2-0.5.23
_CONTEXT_LINES = 20
MAX_FALLBACKS = 10
_PREFIX = re.compile(r"^\[[^\]]*\]\s*")  # SGLang's "[time TPn] "


def to_cli_args(args: Mapping[str, Any]) -> list[str]:
    """Server args or bench settings as flags: `true` is a bare flag, false/None are dropped."""
    argv: list[str] = []
    for key, value in args.items():
        if value is None or value is False:
            continue
        flag = preflight.to_flag(key)
        if value is True:
            argv.append(flag)
        elif isinstance(value, list | tuple):
            argv += [flag, *(str(v) for v in value)]
        else:
            argv += [flag, str(value)]
    return argv


def last_json_line(path: Path) -> dict[str, Any] | None:
    """The last line of a JSONL file that is a JSON object (bench_serving appends one per run)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None


class SGLangEngine:
    """Runs configurations with `$SPECBENCH_SGLANG_PYTHON -m sglang.launch_server`."""

    name = "sglang"

    def __init__(self) -> None:
        # The release this engine's preflight checked the batch against: its runs are spelled
        # for it without asking again (an SGLang without metadata is imported at each asking).
        self._version: str | None = None

    def preflight(self, plan: BatchPlan) -> dict[str, str]:
        found = preflight.known_help(sglang_python())
        self._version = found.version
        return preflight.check_plan(plan, found, table=load_table())

    def fingerprint(self) -> dict[str, Any]:
        return host_fingerprint(sglang_python())

    def run(self, config: RunConfig, ctx: RunContext) -> RunRecord:
        try:  # the record keeps the names that ran
            version = self._version or preflight.sglang_version(
                preflight.resolve_python(sglang_python()))
            config = to_release(config, version, load_table())
        except (UserError, EngineError):
            pass  # no SGLang to ask: the launch itself will say so
        return _Run(config=config, ctx=ctx, rules=load_rules()).execute()


def bench_args(bench: Mapping[str, Any], *, rep: int) -> dict[str, Any]:
    """The preset's bench settings for repetition `rep`: its own seed, and the cache flushed."""
    args = {k: v for k, v in bench.items() if preflight.to_flag(k) not in ("--seed",)}
    given = next((v for k, v in bench.items() if preflight.to_flag(k) == "--seed"), 1)
    try:
        first = int(given)
    except (TypeError, ValueError):
        first = 1
    args["seed"] = first + rep - 1
    args["flush-cache"] = True
    return args


def warmup_args(bench: Mapping[str, Any], *, reps: int) -> dict[str, Any]:
    """The warm-up's bench settings: the repetitions' but for a seed after all of theirs (never
    negative: bench_serving seeds numpy with it), so no repetition replays its prompts."""
    return bench_args(bench, rep=reps + 1)


def prompts_sent(bench: Mapping[str, Any]) -> int:
    given = next((v for k, v in bench.items() if preflight.to_flag(k) == "--num-prompts"), None)
    try:
        return int(given) if given is not None else BENCH_DEFAULT_PROMPTS
    except (TypeError, ValueError):
        return BENCH_DEFAULT_PROMPTS


def _is_real(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _numbers(result: Mapping[str, Any], metric: str) -> dict[str, float]:
    """bench_serving's figures the record keeps: the usual ones and the plan's metric."""
    keys = dict.fromkeys((*BENCH_METRICS, metric))
    return {k: float(v) for k in keys if _is_real(v := result.get(k))}


@dataclass
class _Ending:
    """Why a run stopped early; None of these means it went well."""

    status: str
    exit_code: int | None = None
    extra_lines: list[str] = field(default_factory=list)


class _Watch:
    """Reads the server's log lines and polls /health; sets `event` on anything that matters."""

    def __init__(self, rules: RuleSet, port: int) -> None:
        self.rules = rules
        self.port = port
        self.event = threading.Event()
        self.fatal: Match | None = None
        self.fatal_at: float | None = None
        self.fallbacks: list[str] = []  # lines where the server fell back, seen live
        self.ready = False
        self._previous: deque[str] = deque(maxlen=_CONTEXT_LINES)
        self._closed = threading.Event()
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def on_line(self, line: str) -> None:
        try:
            if self.fatal is None:
                match = self.rules.fatal_match(line, tuple(self._previous))
                if match is not None:
                    self.fatal, self.fatal_at = match, time.monotonic()
                    self.event.set()
            if READY_LINE in line:
                self.ready = True
                self.event.set()
            fell_back = self.rules.fallback_match(line)
            if fell_back is not None and len(self.fallbacks) < MAX_FALLBACKS:
                text = _PREFIX.sub("", fell_back.line)  # one line for the eight ranks
                if all(_PREFIX.sub("", seen) != text for seen in self.fallbacks):
                    self.fallbacks.append(fell_back.line)
        except Exception:  # the log pump must keep draining the pipe whatever happens
            log.exception("log watcher failed on %r", line)
        self._previous.append(line)

    def poll_health(self) -> None:
        url = f"http://127.0.0.1:{self.port}/health"
        while not self._closed.wait(HEALTH_EVERY_S) and not self.ready:
            try:
                with self.opener.open(url, timeout=2.0) as response:
                    if response.status == 200:
                        self.ready = True
                        self.event.set()
            except (OSError, urllib.error.URLError, ValueError):
                pass

    def close(self) -> None:
        self._closed.set()


class _Run:
    """One configuration's run; `execute` never leaves a process of it behind."""

    def __init__(self, *, config: RunConfig, ctx: RunContext, rules: RuleSet) -> None:
        self.config = config
        self.ctx = ctx
        self.python = sglang_python()
        self.port = free_port()
        self.started = server_env(config)  # `${NAME}` read here, on the worker, at start
        self.env = self.started.env
        self.watch = _Watch(rules, self.port)
        self.server: ProcessGroup | None = None
        self.bench: ProcessGroup | None = None
        self._stop_checked = 0.0
        self.repetitions: list[dict[str, Any]] = []
        self.warmup: dict[str, Any] | None = None  # the warm-up's result: recorded, no sample
        self.stopped_early: int | None = None  # the repetition after which stop_early held
        self.notes: list[str] = []  # specbench's own lines, after the server's log tail
        stem = ctx.log_path.name.removesuffix(".log")
        self.bench_log = ctx.log_path.with_name(f"{stem}.bench.log")
        self.bench_stem = ctx.log_path.with_name(f"{stem}.bench")

    def execute(self) -> RunRecord:
        started_at = now_iso()
        samples: dict[str, list[float]] = {}
        accept: list[float] = []
        ending: _Ending | None = None
        try:
            self.ctx.on_phase("launching", {})
            ending = self._launch() or self._wait_ready()
            if ending is None:
                self.ctx.on_phase("ready", {})
                if self.ctx.plan.warmup:
                    self.ctx.on_phase("warmup", {"of": self.ctx.plan.reps})
                    ending = self._bench_once(0, samples=samples, accept=accept)
                ending = ending or self._repeat(samples=samples, accept=accept)
        finally:
            self._shut_down(fatal=self.watch.fatal is not None)
        ending = ending or _Ending("ok", exit_code=0)
        if ending.status == "failed" and ending.exit_code is None and self.server is not None:
            code = self.server.proc.returncode
            # A server that died by itself after its fatal line has a code of its own; a
            # negative one is our signal, not the server's.
            ending.exit_code = code if code is not None and code >= 0 else None
        tail = list(self.server.tail) if self.server is not None else []
        metrics: dict[str, Any] = dict(samples)
        metrics["accept_length"] = sum(accept) / len(accept) if accept else None
        extra: dict[str, Any] = {"repetitions": self.repetitions} if self.repetitions else {}
        extra["warmup"] = self.warmup
        if self.watch.fallbacks:  # early startup lines: the log tail may have lost them
            extra["fallbacks"] = list(self.watch.fallbacks)
        if self.stopped_early is not None:
            extra["stopped_early"] = self.stopped_early
        return to_run_record(
            self.config, self.ctx, status=ending.status, started_at=started_at,
            exit_code=ending.exit_code,
            log_tail="\n".join([*tail, *self.notes, *ending.extra_lines][-TAIL_LINES:]),
            metrics=metrics, extra=extra,
        )

    def _repeat(self, *, samples: dict[str, list[float]], accept: list[float]) -> _Ending | None:
        """The repetitions, until one ends the run or `stop_early` holds."""
        reps = self.ctx.plan.reps
        for rep in range(1, reps + 1):
            self.ctx.on_phase("repetition", {"rep": rep, "of": reps})
            ending = self._bench_once(rep, samples=samples, accept=accept)
            if ending is not None:
                return ending
            got = samples.get(self.ctx.plan.metric, [])
            if rep < reps and self.ctx.stop_early and self.ctx.stop_early(got):
                self.stopped_early = rep
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
        argv = [
            self.python, "-m", "sglang.launch_server", "--host", "127.0.0.1",
            "--port", str(self.port), *to_cli_args(self.config.server_args),
        ]
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

    def _bench_once(
        self, rep: int, *, samples: dict[str, list[float]], accept: list[float]
    ) -> _Ending | None:
        """One bench_serving run: repetition `rep`, or the warm-up for 0."""
        plan = self.ctx.plan
        label = f"rep{rep}" if rep else "warmup"
        out_file = Path(f"{self.bench_stem}.{label}.{secrets.token_hex(3)}.jsonl")
        bench = bench_args(plan.bench, rep=rep) if rep else warmup_args(plan.bench, reps=plan.reps)
        if rep > 1 or (rep == 1 and plan.warmup):
            self._flush_cache(rep)
        argv = [
            self.python, "-m", "sglang.bench_serving", "--backend", "sglang",
            "--base-url", f"http://127.0.0.1:{self.port}", "--output-file", str(out_file),
            *to_cli_args(bench),
        ]
        try:
            self.bench = ProcessGroup(argv, env=self.env, log_path=self.bench_log,
                                      secrets=self.started.secrets)
        except OSError as exc:
            return _Ending("failed", extra_lines=[f"specbench: cannot start bench_serving: {exc}"])
        deadline = time.monotonic() + self.ctx.plan.bench_s
        ending: _Ending | None = None
        try:
            while ending is None and self.bench.poll() is None:
                ending = self._server_ending() or self._cancel_ending()
                if ending is None and time.monotonic() >= deadline:
                    ending = _Ending("timeout")
                if ending is None:
                    self.watch.event.wait(TICK_S)
                    self.watch.event.clear()
        finally:
            self.bench.stop(grace_s=2.0)
        if ending is not None:
            if ending.status == "timeout":
                ending.extra_lines = self._bench_lines(rep, "timed out")
            return ending
        code = self.bench.proc.returncode
        result = last_json_line(out_file)
        if code != 0 or result is None:
            why = f"exited {code}" if code != 0 else f"exited 0 but wrote no result to {out_file}"
            return _Ending("failed", exit_code=code, extra_lines=self._bench_lines(rep, why))
        sent, completed = prompts_sent(plan.bench), result.get("completed")
        if rep == 0:
            self._record_warmup(result, seed=bench["seed"], sent=sent)
            return None
        entry: dict[str, Any] = {"rep": rep, "seed": bench["seed"], "sent": sent,
                                 "completed": completed, "sample": True}
        self.repetitions.append(entry)
        if not _is_count(completed) or completed != sent:
            entry.update(sample=False, why=f"completed {completed} of {sent}")
            self.notes.append(f"specbench: repetition {rep} is no sample: bench_serving "
                              f"completed {completed} of {sent} prompts")
            self.ctx.on_phase("result", {"rep": rep, "of": plan.reps, "metric": plan.metric,
                                         "value": None, "why": entry["why"]})
            return None
        figures = _numbers(result, plan.metric)
        for key, figure in figures.items():
            samples.setdefault(key, []).append(figure)
        if _is_real(length := result.get("accept_length")) and length > 0:
            accept.append(float(length))
            entry["accept_length"] = float(length)
        self.ctx.on_phase("result", {"rep": rep, "of": plan.reps, "metric": plan.metric,
                                     "value": figures.get(plan.metric)})
        return None

    def _record_warmup(self, result: dict[str, Any], *, seed: int, sent: int) -> None:
        """The warm-up's figures as the record keeps them, and its phase; never a sample."""
        plan = self.ctx.plan
        completed = result.get("completed")
        self.warmup = {**_numbers(result, plan.metric), "seed": seed, "sent": sent,
                       "completed": completed}
        if _is_real(value := result.get("accept_length")) and value > 0:
            self.warmup["accept_length"] = float(value)
        if not _is_count(completed) or completed != sent:
            self.notes.append(f"specbench: the warm-up completed {completed} of {sent} prompts "
                              "(not a sample either way)")
        self.ctx.on_phase("result", {"rep": 0, "of": plan.reps, "metric": plan.metric,
                                     "warmup": True, "value": self.warmup.get(plan.metric)})

    def _flush_cache(self, rep: int) -> None:
        """Empty the prefix cache (and the accept counters) before repetition `rep`."""
        url = f"http://127.0.0.1:{self.port}/flush_cache"
        try:
            request = urllib.request.Request(url, data=b"", method="POST")
            with self.watch.opener.open(request, timeout=30) as response:
                if response.status == 200:
                    return
                why = f"HTTP {response.status}"
        except (OSError, urllib.error.URLError, ValueError) as exc:
            why = str(exc)
        self.notes.append(f"specbench: /flush_cache before repetition {rep} failed: {why}")

    def _bench_lines(self, rep: int, why: str) -> list[str]:
        assert self.bench is not None
        self.bench.wait_output(1.0)
        lines = [line for line in self.bench.tail if line.strip()][-BENCH_ERROR_LINES:]
        what = f"repetition {rep}" if rep else "warm-up"
        return [f"specbench: bench_serving ({what}) {why}:", *lines]

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
        now = time.monotonic()
        if now - self._stop_checked < STOP_CHECK_EVERY_S:
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
