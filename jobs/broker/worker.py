"""`specbench worker`: one Celery worker per GPU host and queue, and what keeps it honest.

Besides Celery's own loop (solo pool: one batch, so one server, at a time) it runs:
- on start-up, the orphan sweep: every server a dead worker of this queue left running is
  SIGKILLed (`jobs.engines.procs` registers each process group in `data_dir()/run/<queue>`);
- a heartbeat thread: the Redis key `specbench:worker:<queue>:<id>` (its TTL is the lease TTL),
  which is how `live_workers` counts the workers serving a queue, and the `worker` heartbeat
  file of `jobs.ops.health` (every 15 s);
- the recovery sweep, at start-up and every lease TTL while idle: unfinished batches of this
  queue whose store lease has lapsed, or whose owner was a process of this host that is gone
  (`is_dead_here`: a worker restarted after a kill -9 need not wait for the TTL), get a fresh
  `run_batch` message, oldest first;
- a patient store (`jobs.store.patient.PatientStore`): a batch's store calls wait out a
  database outage (up to SPECBENCH_DB_PATIENCE_S), so the batch resumes instead of failing;
- on SIGTERM (or SIGINT), Celery's warm shutdown: the running batch stops its server, hands
  itself back to the queue and the worker exits within seconds (`Runtime.stopping`,
  jobs.broker.tasks), instead of waiting the batch out;
- no beat: the one digest scheduler is `python -m jobs.broker.beat` (compose's `beat`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import redis

from jobs import redaction, settings
from jobs.batches import retention
from jobs.broker.sink import StreamSink
from jobs.broker.streams import connect
from jobs.engines import procs
from jobs.errors import BrokerError, InfraError
from jobs.ops import health, owners
from jobs.store import ACTIVE_STATES, Store
from jobs.store.patient import PatientStore

log = logging.getLogger(__name__)

WORKER_KEY = "specbench:worker:{queue}:{worker}"
DEFAULT_LEASE_TTL_S = 30.0
SINK_TIMEOUT_S = 1.0  # the event sink's socket timeouts: its publisher thread retries anyway
SINK_CLOSE_S = 3.0  # how long a stopping worker tries to send the events still queued


def lease_ttl() -> float:
    return settings.seconds("SPECBENCH_LEASE_TTL", default=DEFAULT_LEASE_TTL_S, least=1.0)


def ping(client: redis.Redis, url: str) -> None:
    """Raise BrokerError unless the broker answers now."""
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        raise BrokerError.unreachable(url, exc) from None


# A lease owner names its process, `host:pid:start:pidns:nonce` (jobs.ops.owners): a worker
# restarted after a kill -9 sees the owner dead (`is_dead_here`) even if its pid was reused.
lease_owner = owners.process_owner
is_dead_here = owners.is_dead_here


def registry_dir(queue: str) -> Path:
    return settings.data_dir().resolve() / "run" / re.sub(r"[^A-Za-z0-9_.-]", "_", queue)


@dataclass
class Runtime:
    """What the tasks of this worker process share: store, Redis, event sink, lease TTL."""

    queue: str
    url: str
    store: Store
    client: redis.Redis
    ttl: float
    worker_id: str = field(
        default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
    )
    busy: bool = False
    idle_since: float = field(default_factory=time.monotonic)
    sent: dict[str, float] = field(default_factory=dict)
    # Set (from the signal handler: a plain assignment) once the worker is told to stop: the
    # batch it runs stops its server and goes back to the queue (jobs.broker.tasks).
    stopping: str | None = None

    @cached_property
    def sink(self) -> StreamSink:
        """The one sink of this worker: events go out from a thread of its own, on a client of
        its own, so that a batch never waits on Redis (jobs.broker.sink)."""
        return StreamSink(connect(self.url, timeout_s=SINK_TIMEOUT_S))

    def set_busy(self, busy: bool) -> None:
        self.busy = busy
        if not busy:
            self.idle_since = time.monotonic()


_runtime: Runtime | None = None
_runtime_lock = threading.Lock()


def runtime() -> Runtime:
    """This process's runtime; made from the environment when the worker did not make one."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            url = settings.broker_url()
            if url is None:
                raise InfraError("the distributed worker needs SPECBENCH_BROKER_URL")
            _runtime = Runtime(queue=settings.default_queue(), url=url, store=PatientStore(),
                               client=connect(url), ttl=lease_ttl())
            procs.set_registry(registry_dir(_runtime.queue))
        return _runtime


def beat(rt: Runtime) -> None:
    """Refresh this worker's liveness key."""
    key = WORKER_KEY.format(queue=rt.queue, worker=rt.worker_id)
    rt.client.set(key, "busy" if rt.busy else "idle", ex=max(int(rt.ttl + 0.999), 1))


def sweep(rt: Runtime, app: Any, *, startup: bool = False) -> list[str]:
    """Re-send `run_batch` for this queue's unfinished batches whose lease has lapsed.

    A queued batch is only re-sent at start-up or after the worker has been idle a while (its
    message was lost with Redis or a dead worker); a duplicate message is harmless anyway.
    """
    from jobs.broker.celery_app import RUN_BATCH

    now = settings.utcnow()
    quiet = startup or time.monotonic() - rt.idle_since >= rt.ttl
    sent = []
    for row in rt.store.list_batches(states=ACTIVE_STATES, queue=rt.queue):
        held = row.lease_owner is not None and row.lease_expires_at and row.lease_expires_at > now
        if held and not is_dead_here(row.lease_owner):
            continue
        if row.state == "queued" and not quiet:
            continue
        if time.monotonic() - rt.sent.get(row.id, -1e9) < 2 * rt.ttl:
            continue
        app.send_task(RUN_BATCH, args=[row.id], queue=rt.queue)
        rt.sent[row.id] = time.monotonic()
        sent.append(row.id)
    if sent:
        log.info("recovery: re-sent %s", ", ".join(sent))
    return sent


def _keep_alive(rt: Runtime, app: Any, stop: threading.Event) -> None:
    last_sweep = time.monotonic()
    last_touch = time.monotonic()
    failing = False  # one traceback per outage, not one per beat
    while not stop.wait(max(rt.ttl / 3, 0.2)):
        if time.monotonic() - last_touch >= health.HEARTBEAT_INTERVAL_S:
            last_touch = time.monotonic()
            _touch()
        try:
            beat(rt)
            if not rt.busy and time.monotonic() - last_sweep >= rt.ttl:
                last_sweep = time.monotonic()
                sweep(rt, app)
        except Exception as exc:  # noqa: BLE001 - Redis or the store away: try again next beat
            if not failing:
                log.warning("heartbeat/recovery failed; retrying quietly until it works",
                            exc_info=True)
            else:
                log.debug("heartbeat/recovery still failing: %s", exc)
            failing = True
        else:
            if failing:
                log.info("heartbeat/recovery works again")
            failing = False


def _touch() -> None:
    """The `worker` heartbeat file that `python -m jobs.ops.health worker` checks."""
    try:
        health.touch_heartbeat("worker")
    except OSError:
        log.warning("could not touch the worker heartbeat", exc_info=True)


def _forget_heartbeat() -> None:
    """Remove the heartbeat file if this process wrote it last (workers of other queues may
    share the data directory)."""
    path = health.heartbeat_path("worker")
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink(missing_ok=True)
    except (OSError, ValueError):
        pass


def main(queue: str) -> int:
    """Start a worker for `queue` and block until Celery stops."""
    from celery import signals

    from jobs import __version__
    from jobs.broker.celery_app import make_app

    url = settings.broker_url()
    if url is None:
        raise InfraError("specbench worker needs SPECBENCH_BROKER_URL (the Redis broker)")
    client = connect(url, timeout_s=2.0)
    ping(client, url)
    client = connect(url)
    global _runtime
    rt = _runtime = Runtime(queue=queue, url=url, store=PatientStore(), client=client,
                            ttl=lease_ttl())
    print(f"specbench {__version__} worker {rt.worker_id} serving queue {queue!r} "
          f"on {redaction.redact_urls(url)}", flush=True)
    registry = registry_dir(queue)
    procs.set_registry(registry)
    killed = procs.kill_orphans(registry)
    if killed:
        print(f"killed {len(killed)} server group(s) left by a dead worker: {killed}", flush=True)
    app = make_app(url)
    app.set_default()
    app.set_current()

    def on_ready(**_: Any) -> None:
        try:
            sweep(rt, app, startup=True)
        except Exception:  # noqa: BLE001 - the periodic sweep will try again
            log.warning("start-up recovery failed", exc_info=True)

    def on_shutting_down(sig: Any = None, how: Any = None, **_: Any) -> None:
        # Celery's SIGTERM/SIGINT handler, in the main thread: its warm shutdown would wait for
        # the running batch to end (hours); this makes the batch hand itself back instead.
        rt.stopping = str(sig or "a stop signal")

    signals.worker_ready.connect(on_ready, weak=False)
    signals.worker_shutting_down.connect(on_shutting_down, weak=False)
    # A receiver on setup_logging keeps Celery from replacing the caller's logging
    # (`specbench worker` configures jobs.ops.logs).
    signals.setup_logging.connect(_keep_logging, weak=False)
    stop = threading.Event()
    beat(rt)
    _touch()
    threading.Thread(target=_keep_alive, args=(rt, app, stop), name="keep-alive",
                     daemon=True).start()
    retention.start_pruning(lambda: [r.id for r in rt.store.list_batches(
        states=ACTIVE_STATES)], stop=stop)  # old server logs: now and hourly
    worker = app.Worker(
        hostname=f"specbench-{queue}@{rt.worker_id}", queues=[queue],
        pool="solo", concurrency=1, loglevel=os.environ.get("SPECBENCH_LOG_LEVEL", "INFO"),
        without_gossip=True, without_mingle=True, without_heartbeat=True,
        redirect_stdouts=False, quiet=True,
    )
    try:
        worker.start()
    finally:
        stop.set()
        if "sink" in rt.__dict__:  # events a stopping worker still holds: a bounded try
            rt.sink.close(timeout=SINK_CLOSE_S)
        _forget_heartbeat()
        try:
            client.delete(WORKER_KEY.format(queue=queue, worker=rt.worker_id))
        except (redis.RedisError, OSError):
            pass
    return int(worker.exitcode or 0)


def _keep_logging(**_: Any) -> None:
    """Celery's setup_logging signal: logging is already configured."""
