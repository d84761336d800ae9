"""What many tests build alike, built once, so that a test says only what is its own.

`standin_preset`: a preset of the stand-in SGLang (tests/standin/sglang) as the YAML text a test
writes to its config folder or a file. `killed_worker`: a batch on a real `specbench worker` that
the test kills mid-batch (kill -9, its servers left running) and restarts, every process and
connection closed however the test ends. `specbench_here`: `specbench ARGS` in the test's own
process, for what needs no process of its own (a refusal, a `show`): a process start costs
0.3-1 s of CPU in imports, and the suite is CPU-bound. `loopback_client`: an HTTP client for a
server on 127.0.0.1, with one TLS context for the process instead of one per client. `needs`:
skip where an optional package is missing, without importing it.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import ssl
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import yaml

from tests.standin.harness import TINY_BENCH

if TYPE_CHECKING:  # the distributed scaffolding is imported only by a test that kills a worker
    from jobs.core.events import Event
    from jobs.core.plans import BatchPlan
    from tests.jobs.test_distributed import Site, Worker

# The tiny server every stand-in preset runs (the stand-in reads only what its modes need).
STANDIN_SERVER: dict[str, Any] = {
    "model-path": "/models/tiny-llama", "tp-size": 1, "mem-fraction-static": 0.8,
    "cuda-graph-max-bs": 8,
}


def standin_preset(
    name: str,
    *,
    description: str | None = None,
    queue: str | None = None,
    reps: int = 1,
    min_effect_pct: float | None = 2.0,
    bench_s: float = 20,
    bench: Mapping[str, Any] | None = None,
    server_args: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    approaches: Sequence[Mapping[str, Any]] | None = (),
    overridable: Sequence[str] | None = (),
    **more: Any,
) -> str:
    """The YAML of a stand-in SGLang preset named `name`: its tiny server and bench with
    `server_args` and `bench` over them (a key set to None is left out), the baseline's `env`,
    the `approaches` (mappings as a preset writes them: name, hypothesis, server_args, env...),
    and `more` top-level keys (warmup, loads, slo, allow_few_samples, sweep...). None leaves a
    key out (min_effect_pct, overridable, approaches: the preset's defaults)."""
    preset: dict[str, Any] = {"name": name}
    if description is not None:
        preset["description"] = description
    preset["engine"] = "sglang"
    if queue is not None:
        preset["queue"] = queue
    preset["metric"] = "output_throughput"
    if min_effect_pct is not None:
        preset["min_effect_pct"] = min_effect_pct
    preset["reps"] = reps
    preset["timeouts"] = {"startup_s": 60, "bench_s": bench_s}
    preset["bench"] = _over(TINY_BENCH, bench)
    preset.update(more)
    if overridable is not None:
        preset["overridable"] = list(overridable)
    preset["baseline"] = {"server_args": _over(STANDIN_SERVER, server_args),
                          "env": dict(env or {})}
    if approaches is not None:
        preset["approaches"] = [dict(approach) for approach in approaches]
    return yaml.safe_dump(preset, sort_keys=False, allow_unicode=True)


def _over(base: Mapping[str, Any], changes: Mapping[str, Any] | None) -> dict[str, Any]:
    out = {**base, **(changes or {})}
    return {key: value for key, value in out.items() if value is not None}


@dataclass
class KilledWorker:
    """A batch on a real `specbench worker` (`worker`), the test's subscription to every batch's
    events (`sub`), and the worker it starts once it has killed the first (`restart`)."""

    site: Site
    queue: str
    worker: Worker
    dispatcher: Any = None
    sub: Any = None
    batch: str = ""
    restarted: Worker | None = None

    def submit(self, plan: BatchPlan) -> str:
        """The batch of `plan`, queued: its ID."""
        self.batch = self.dispatcher.submit(plan, requested_by="U1").batch.id
        return self.batch

    def wait(self, until: Callable[[Event], bool], *, timeout: float) -> list[Event]:
        """The events up to the first that `until` holds for."""
        from tests.jobs.test_distributed import collect

        return collect(self.sub, until, timeout=timeout)

    def restart(self) -> Worker:
        """Another worker on the queue: it finds the batch its predecessor left."""
        from tests.jobs.test_distributed import Worker

        self.restarted = Worker(self.site, self.queue)
        return self.restarted

    def resume(self, *, timeout: float) -> list[Event]:
        """Restart, then the events until the batch ends."""
        from tests.jobs.test_distributed import is_end

        self.restart()
        return self.wait(is_end(self.batch), timeout=timeout)


@contextmanager
def killed_worker(site: Site, queue: str) -> Iterator[KilledWorker]:
    """A worker on `queue`, a distributed dispatcher and the test's subscription to its events;
    the test submits its batch (`run.submit`), kills the worker (`run.worker.kill9()`, or a
    signal of its own) and resumes. On the way out the restarted worker, the first one, the
    subscription and the dispatcher are stopped, whatever happened."""
    from tests.jobs.test_distributed import Worker, dispatcher

    run = KilledWorker(site=site, queue=queue, worker=Worker(site, queue))
    d = run.dispatcher = dispatcher(site)
    try:
        run.sub = d.subscribe()
        yield run
    finally:
        if run.restarted is not None:
            run.restarted.stop()
        run.worker.stop()
        if run.sub is not None:
            run.sub.close()
        d.close()


def needs(*packages: str) -> pytest.MarkDecorator:
    """A skip mark for a test (or, as `pytestmark`, a module) that needs `packages` installed,
    which finds them without importing them: `pytest.importorskip` imports, and every pytest
    worker collects every module, so a module-level `importorskip("optuna")` cost each worker
    0.3 s of CPU and a test's `importorskip("transformers")` 3 s in a worker that only runs
    the package in a subprocess."""
    missing = [name for name in packages if importlib.util.find_spec(name) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)} installed")


def specbench_here(capsys: pytest.CaptureFixture[str], *argv: str,
                   env: Mapping[str, str] | None = None, drop: Sequence[str] = (),
                   cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`specbench ARGV` through `bot.cli.main.main`, the entry the console script calls, in this
    process: the variables named or prefixed in `drop` unset and `env` set while it runs (in
    `cwd`), its stdout and stderr read back, its exit code (argparse's SystemExit included) as
    the returncode, as `subprocess.run` would give them. Everything is set back afterwards."""
    from bot.cli.main import main

    capsys.readouterr()  # what came before is not this command's
    with pytest.MonkeyPatch.context() as patch:
        for name in [n for n in os.environ if n.startswith(tuple(drop))]:
            patch.delenv(name)
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        if cwd is not None:
            patch.chdir(cwd)
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse's refusals
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        captured = capsys.readouterr()
    return subprocess.CompletedProcess(list(argv), code, captured.out, captured.err)


def specbench_here_as(capsys: pytest.CaptureFixture[str],
                      environment: Callable[..., dict[str, str]],
                      cwd: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`run(place, *argv, **extra)`: `specbench_here` in `cwd` with exactly the environment
    `environment(place, **extra)` gives a test's `specbench` subprocess (its STANDIN_ and
    SPECBENCH_ variables those alone)."""

    def run(place: Path, *argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return specbench_here(capsys, *argv, env=environment(place, **extra),
                              drop=("STANDIN_", "SPECBENCH_"), cwd=cwd)

    return run


@functools.cache
def _tls() -> ssl.SSLContext:
    return ssl.create_default_context()


def loopback_client(**options: Any) -> httpx.Client:
    """`httpx.Client(**options)` sharing this process's one TLS context: httpx builds a context
    for each client it makes, loading the CA bundle (30-50 ms of CPU), and a test polling a bot's
    /healthz every 0.1 s with `httpx.get` made a client each time."""
    return httpx.Client(verify=_tls(), **options)


def loopback_get(url: str, *, timeout: float = 5) -> httpx.Response:
    """`httpx.get(url)` through a `loopback_client`."""
    with loopback_client(timeout=timeout) as client:
        return client.get(url)
