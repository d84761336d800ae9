"""The collectives probe (docs/contracts.md "Evidence for the why"): `all_reduce` timed with
torch.distributed across N local ranks, each a real process (`rank_worker.py`) running with the
request's environment (NCCL_ALGO, NCCL_MAX_NCHANNELS...), rendezvous on 127.0.0.1.

The ranks share one process group of their own: whatever happens (done, a rank that fails, a
rank that never joins and the probe's timeout, an interrupt) the whole group is killed and
every rank reaped before `run_probe` returns or raises.

A `${NAME}` of the request's env is read from this process's environment only as the ranks
start; the probe's JSON keeps the reference, and what it resolved to (with every secret-looking
value of this environment) reads *** in a rank's reason.

    ProbeError (InfraError, exit 1)   a rank failed, or the ranks could not start
    ├── ProbeTimeout                  the probe ran past its timeout; says which sizes completed
    └── ProbeCancelled                `should_stop` said so (a queued probe cancelled)
"""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from jobs import redaction
from jobs.core.plans import reference_values, resolve_env
from jobs.core.units import human_size
from jobs.engines import orphans
from jobs.engines.procs import free_port
from jobs.errors import InfraError
from jobs.evidence.probe_input import ProbeRequest, to_request

WORKER = Path(__file__).with_name("rank_worker.py")
TORCH_GRACE_S = 30.0  # torch's own timeout in the ranks runs this much past the probe's
_PORT_TAKEN = ("EADDRINUSE", "address already in use")
_RAISED = re.compile(r"[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)(: |$)")


class ProbeError(InfraError):
    """The probe could not measure: a rank failed or could not start."""


class ProbeCancelled(ProbeError):
    """The probe was cancelled while it ran; its ranks were stopped."""


class ProbeTimeout(ProbeError):
    """The probe ran past its timeout; its ranks were stopped."""

    def __init__(self, message: str, *, completed: Sequence[int], pids: Sequence[int]) -> None:
        super().__init__(message)
        self.completed = tuple(completed)
        self.pids = tuple(pids)  # the ranks', all gone by the time this is raised


def figures(size: int, times_us: Sequence[float], world: int) -> dict[str, Any]:
    """One size's line of the probe's JSON: the median latency, and the bandwidths by the
    nccl-tests convention (algbw = bytes / time; busbw = algbw x 2(N-1)/N for all_reduce)."""
    latency = statistics.median(times_us)
    algbw = size / latency / 1e3  # bytes per microsecond is MB/s: /1e3 for GB/s
    return {"bytes": size, "latency_us": latency, "algbw_gbps": algbw,
            "busbw_gbps": algbw * 2 * (world - 1) / world}


def run_probe(request: ProbeRequest, *, python: str = sys.executable,
              should_stop: Callable[[], bool] | None = None) -> dict[str, Any]:
    """docs/contracts.md's probe JSON for `request`, checked for this host (`to_request`,
    `for_this_host`), measured; raises ProbeError, ProbeTimeout, or ProbeCancelled once
    `should_stop()` is true."""
    assert request.backend is not None, "a request checked for this host names its backend"
    for attempt in (1, 2):  # a free port taken between looking and binding: once more
        try:
            return _attempt(request, python=python, should_stop=should_stop)
        except _PortTaken as exc:
            if attempt == 2:
                raise ProbeError(f"the ranks could not rendezvous: {exc}") from None
    raise AssertionError("unreachable")


def measure(world: int, env: Mapping[str, str], sizes: Sequence[int],
            timeout_s: float) -> dict[str, Any]:
    """The batch's probe (jobs.batches.evidence_step's `Prober`): the default backend and
    iterations; raises with a one-line reason."""
    return run_probe(to_request(world=world, env=env, sizes=sizes, timeout_s=timeout_s))


class _PortTaken(Exception):
    pass


class _Ranks:
    """The rank processes of one attempt, in one process group led by rank 0."""

    def __init__(self, request: ProbeRequest, *, python: str) -> None:
        self.request = request
        self.procs: list[subprocess.Popen[bytes]] = []
        self.errs: list[IO[bytes]] = []
        self.lines: list[str] = []
        self._reader: threading.Thread | None = None
        self._stopped = False
        self._entry: Path | None = None
        port = free_port()
        argv = [python, str(WORKER), "--backend", str(request.backend),
                "--sizes", ",".join(map(str, request.sizes)), "--iters", str(request.iters),
                "--warmup", str(request.warmup),
                "--timeout", str(request.timeout_s + TORCH_GRACE_S)]
        resolved = resolve_env(dict(request.env), environ=os.environ)
        if not resolved.is_complete:  # for_this_host checked it: the environment changed
            raise ProbeError(resolved.unset[0])
        self.secrets = (*redaction.secret_values(os.environ, resolved.env),
                        *reference_values([dict(request.env)], environ=os.environ))
        base = {**os.environ, "OMP_NUM_THREADS": "1", **resolved.env,
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                "WORLD_SIZE": str(request.world)}
        try:
            for rank in range(request.world):
                err = tempfile.TemporaryFile()
                self.errs.append(err)
                self.procs.append(subprocess.Popen(
                    argv, env={**base, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                    stdin=subprocess.DEVNULL, stderr=err,
                    stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
                    process_group=self.procs[0].pid if self.procs else 0))
        except OSError as exc:
            self.stop()
            raise ProbeError(f"cannot start the probe's ranks: {exc}") from None
        # in the registry while they run: a worker killed with -9 leaves none behind, the next
        # one kills them (jobs.engines.orphans), as it does a server's group
        self._entry = orphans.register(pgid=self.procs[0].pid, argv=argv, log_path=Path(os.devnull))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        stdout = self.procs[0].stdout
        assert stdout is not None
        for raw in stdout:
            self.lines.append(raw.decode("utf-8", "replace"))

    def wait(self, deadline: float, should_stop: Callable[[], bool] | None = None) -> None:
        """Until every rank exits 0; raises at the first failure, at the deadline or when
        `should_stop()` says so."""
        while True:
            if should_stop is not None and should_stop():
                raise ProbeCancelled(f"the probe was cancelled and its ranks were stopped; "
                                     f"{self._done()}")
            for rank, proc in enumerate(self.procs):
                code = proc.poll()
                if code not in (None, 0):
                    raise self._failed(rank, code)
            if all(p.returncode == 0 for p in self.procs):
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._timed_out()
            running = next(p for p in self.procs if p.returncode is None)
            try:
                running.wait(timeout=min(left, 0.05))
            except subprocess.TimeoutExpired:
                pass

    def stop(self) -> None:
        """Kill the ranks' process group and reap every rank (no rank left behind)."""
        if self._stopped:
            return
        self._stopped = True
        if self.procs:
            try:
                os.killpg(self.procs[0].pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass  # every rank has exited already
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        if self._entry is not None:
            self._entry.unlink(missing_ok=True)
        if self._reader is not None:
            self._reader.join(timeout=5)
        for proc in self.procs:
            if proc.stdout is not None:
                proc.stdout.close()

    def close(self) -> None:
        for err in self.errs:
            err.close()

    def results(self) -> list[dict[str, Any]]:
        out = []
        for line in self.lines:
            try:
                got = json.loads(line)
            except json.JSONDecodeError:
                continue  # a stray print in a rank (a sitecustomize, a library): not ours
            if isinstance(got, dict) and "bytes" in got and got.get("times_us"):
                out.append(figures(int(got["bytes"]), got["times_us"], self.request.world))
        return out

    def _done(self) -> str:
        self.stop()
        sizes = [r["bytes"] for r in self.results()]
        total = len(self.request.sizes)
        if not sizes:
            return f"none of {total} sizes completed"
        return (f"{len(sizes)} of {total} sizes completed "
                f"({', '.join(human_size(s) for s in sizes)})")

    def _failed(self, rank: int, code: int) -> Exception:
        done = self._done()
        last = _last_line(self.errs[rank], secrets=self.secrets)
        if any(mark in last for mark in _PORT_TAKEN):
            return _PortTaken(last)
        how = f"was killed by signal {-code}" if code < 0 else f"exited with {code}"
        return ProbeError(f"rank {rank} of the probe {how}: {last or 'no message'}; {done}")

    def _timed_out(self) -> ProbeTimeout:
        done = self._done()
        return ProbeTimeout(
            f"the probe timed out after {self.request.timeout_s:g} s ({self.request.world} "
            f"ranks, {self.request.backend}) and its ranks were stopped; {done}",
            completed=[r["bytes"] for r in self.results()], pids=[p.pid for p in self.procs])


def _attempt(request: ProbeRequest, *, python: str,
             should_stop: Callable[[], bool] | None) -> dict[str, Any]:
    deadline = time.monotonic() + request.timeout_s
    ranks = _Ranks(request, python=python)
    try:
        ranks.wait(deadline, should_stop)
        ranks.stop()
        sizes = ranks.results()
        if [s["bytes"] for s in sizes] != list(request.sizes):
            raise ProbeError(f"rank 0 reported {len(sizes)} of {len(request.sizes)} sizes")
        return {"backend": request.backend, "world": request.world, "env": dict(request.env),
                "iters": request.iters, "warmup": request.warmup, "sizes": sizes}
    finally:
        ranks.stop()
        ranks.close()


def _last_line(handle: IO[bytes], *, secrets: Sequence[str], limit: int = 300) -> str:
    """The rank's reason, each of `secrets` masked: its last exception line (torch's CUDA errors
    trail advice lines after it), else its last line."""
    handle.seek(0)
    text = redaction.redact(handle.read().decode("utf-8", "replace"), secrets=secrets)
    lines = [ln.strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    last = next((ln for ln in reversed(lines) if _RAISED.match(ln)), lines[-1] if lines else "")
    return last if len(last) <= limit else last[:limit] + "..."
